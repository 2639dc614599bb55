"""Every hack name a test expects is a HackName (drkernel.types.verify_result): a renamed or removed hack fails here,
naming the file and line, instead of leaving a test that compares against a name the verifier can no longer
report (an `==` would fail without saying why, a `!=` or `not in` would pass forever). Read from the tests'
source: comparisons with `.hack` / `["hack"]` / `.hacks` / `["all_hacks"]`, `hack=` and `expect_hack=`
keywords, and the hack column of test_adversarial's Expect rows; plus benchmarks/candidate_set.py."""

from __future__ import annotations

import ast
from pathlib import Path

from hack_names import HACKS

ROOT = Path(__file__).resolve().parents[2]
HACK_FIELDS = {"hack", "hacks", "all_hacks", "expect_hack"}
# test_names.py feeds the result model unknown names on purpose (to see them refused)
NOT_SCANNED = {"tests/verify/test_names.py"}


def _field(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    return None


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _strings(e)]
    return []


def expected_hacks(source: str) -> list[tuple[int, str]]:
    """(line, name) for every literal hack name the source compares a verdict against or builds one with."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_field(side) in HACK_FIELDS for side in sides):
                found += [(node.lineno, s) for side in sides for s in _strings(side)]
        elif isinstance(node, ast.Call):
            found += [(node.lineno, s) for k in node.keywords if k.arg in HACK_FIELDS for s in _strings(k.value)]
            if isinstance(node.func, ast.Name) and node.func.id == "Expect" and len(node.args) >= 4:
                # Expect(problem, compiled, correct, hack, error)
                found += [(node.lineno, s) for s in _strings(node.args[3])]
    return found


def test_the_reader_finds_each_form():
    source = """
assert r.hack == "a" and r.details["all_hacks"] == ["b", "c"]
assert data["hack"] != "d" and r.hack not in ("e", "f") and v.hacks == ["g"]
x = VerifyResult(hack="h"); y = Candidate("p", expect_hack="i"); z = Expect("ref", True, ANY, "j", ANY)
assert r.reward == "not a hack" and r.error.kind == "runtime"
"""
    assert sorted(name for _, name in expected_hacks(source)) == list("abcdefghij")


def test_every_expected_hack_is_a_hack_name():
    files = [p for p in (ROOT / "tests").rglob("test_*.py") if str(p.relative_to(ROOT)) not in NOT_SCANNED]
    files.append(ROOT / "benchmarks" / "candidate_set.py")
    seen, unknown = set(), []
    for path in files:
        for line, name in expected_hacks(path.read_text()):
            seen.add(name)
            if name not in HACKS:
                unknown.append(f"{path.relative_to(ROOT)}:{line}: {name!r}")
    assert not unknown, f"not a HackName ({sorted(HACKS)}):\n" + "\n".join(unknown)
    assert len(seen) >= 6, seen  # the tests do expect most hacks by name: the reader still finds them
