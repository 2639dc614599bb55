"""Every hack and check name the verifier can emit is in the Literal the result model validates against.

A name missing from `HackName`/`CheckName` would only surface as a pydantic error on the first candidate that
triggers it (an infra_error in training), so the names the code passes are read from its source here.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

from drkernel.types.verify_result import CheckName, CheckRecord, HackName, VerifyResult

VERIFY = Path(__file__).resolve().parents[2] / "drkernel" / "verify"
HACKS, CHECKS = set(get_args(HackName)), set(get_args(CheckName))
_ROLE = {"HackName": "hack", "CheckName": "check"}


def _strings(node: ast.AST | None) -> list[str]:
    return [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []


def _tuple_roles(annotation: ast.AST) -> list[str | None] | None:
    """`list[tuple[HackName, CheckName, ...]]` -> ["hack", "check", None, ...]; None for other annotations."""
    if not (isinstance(annotation, ast.Subscript) and isinstance(annotation.slice, ast.Subscript)):
        return None
    inner = annotation.slice.slice
    elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
    roles = [_ROLE.get(e.id) if isinstance(e, ast.Name) else None for e in elts]
    return roles if any(roles) else None


def emitted(source: str) -> list[tuple[str, str]]:
    """(role, name) for every literal name in the source's verdict calls, hack tuples and typed tables."""
    tree = ast.parse(source)
    out: list[tuple[str, str]] = []
    tables: dict[str, list[str | None]] = {}

    def table_row(roles: list[str | None], row: ast.AST) -> None:
        if isinstance(row, ast.Tuple):
            for role, elt in zip(roles, row.elts):
                out.extend((role, s) for s in _strings(elt) if role)

    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            roles = _tuple_roles(node.annotation)
            if roles:
                tables[node.target.id] = roles
                for row in node.value.elts if isinstance(node.value, ast.List) else []:
                    table_row(roles, row)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "hack" and isinstance(kw.value, ast.Tuple) and len(kw.value.elts) == 2:
                    out.extend(("hack", s) for s in _strings(kw.value.elts[0]))
                    out.extend(("check", s) for s in _strings(kw.value.elts[1]))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name, owner, args = node.func.attr, node.func.value, node.args
            if name == "hack" and args:
                out.extend(("hack", s) for s in _strings(args[0]))
                out.extend(("check", s) for s in _strings(args[1]) if len(args) > 1)
            elif name in ("check", "failed") and args:
                out.extend(("check", s) for s in _strings(args[0]))
            elif name == "append" and isinstance(owner, ast.Attribute) and owner.attr == "hacks" and args:
                out.extend(("hack", s) for s in _strings(args[0]))
            elif name == "append" and isinstance(owner, ast.Name) and owner.id in tables and args:
                table_row(tables[owner.id], args[0])
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and node.target.id in ("hack", "check"):
            if isinstance(node.iter, ast.Tuple):
                out.extend((node.target.id, s) for e in node.iter.elts for s in _strings(e))
    return out


def _all_emitted() -> list[tuple[str, str, str]]:
    paths = sorted(VERIFY.rglob("*.py"))
    return [(path.name, role, name) for path in paths for role, name in emitted(path.read_text())]


def test_every_emitted_name_is_in_its_literal():
    found = _all_emitted()
    unknown = [(f, role, n) for f, role, n in found if n not in (HACKS if role == "hack" else CHECKS)]
    assert not unknown, f"names missing from HackName/CheckName: {unknown}"
    # the scan sees every hack the verifier raises, through each way the code raises one
    assert {n for _, role, n in found if role == "hack"} == HACKS
    assert {n for _, role, n in found if role == "check"} == CHECKS


def test_scanner_reads_each_form():
    src = """
v.hack("bogus_hack", "bogus_check_a", "x")
v.check("bogus_check_b", True)
v.hacks.append("bogus_hack_b")
raise CandidateFault("protocol", "m", hack=("bogus_hack_c", "bogus_check_c"))
found: list[tuple[HackName, CheckName, list[str], str]] = [("bogus_hack_d", "bogus_check_d", [], "")]
found.append(("bogus_hack_e", "bogus_check_e", [], ""))
for check in ("bogus_check_f",):
    pass
"""
    assert sorted(emitted(src)) == sorted(
        [
            ("hack", "bogus_hack"),
            ("check", "bogus_check_a"),
            ("check", "bogus_check_b"),
            ("hack", "bogus_hack_b"),
            ("hack", "bogus_hack_c"),
            ("check", "bogus_check_c"),
            ("hack", "bogus_hack_d"),
            ("check", "bogus_check_d"),
            ("hack", "bogus_hack_e"),
            ("check", "bogus_check_e"),
            ("check", "bogus_check_f"),
        ]
    )


def test_result_model_rejects_unknown_names():
    with pytest.raises(ValidationError):
        VerifyResult(hack="output_copy")
    with pytest.raises(ValidationError):
        CheckRecord(name="compile", passed=True)
    assert VerifyResult(hack="decoy_kernel").hack == "decoy_kernel"
