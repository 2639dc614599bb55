"""Every module the verifier names by string resolves, with the function it is called for.

The caller never imports torch, so the fork-server's preload list and each child's entry are module paths in
strings (drkernel.verify.process.forkserver, engine, process.group), and the attack inputs of the tests name the
harness modules they patch the same way. A move that forgets one of these strings breaks no import: the
fork-server swallows a failed preload and a spare's child dies at start. The names are read from the code here,
so the next rename that misses one fails this test instead.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

from drkernel.verify.process import forkserver

ROOT = Path(__file__).resolve().parents[2]
QUOTED_MODULE = re.compile(r"""["'](drkernel(?:\.[A-Za-z_]\w*)+)["']""")
GROUP = ROOT / "drkernel" / "verify" / "process" / "group.py"


def _sources() -> list[Path]:
    return sorted([*(ROOT / "drkernel").rglob("*.py"), *(ROOT / "tests" / "verify").rglob("*.py")])


def _calls_by_string(path: Path) -> list[tuple[str, str]]:
    """(module, function) of every `args=("drkernel....", "function", ...)` tuple: the torch-free trampoline
    (process.entry.run) imports the module and calls the function in a fork-server child."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Tuple) and len(node.elts) >= 2:
            head, fn = node.elts[0], node.elts[1]
            if (
                isinstance(head, ast.Constant)
                and isinstance(head.value, str)
                and QUOTED_MODULE.fullmatch(repr(head.value))
                and isinstance(fn, ast.Constant)
                and isinstance(fn.value, str)
                and fn.value.isidentifier()
            ):
                found.append((head.value, fn.value))
    return found


def _role_modules() -> list[str]:
    """The modules a spare becomes (Group's `children` table: role -> (module, pipe ends))."""
    roles = []
    for node in ast.walk(ast.parse(GROUP.read_text())):
        values: list[ast.AST] = []
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "children" for t in node.targets):
            values = list(node.value.values) if isinstance(node.value, ast.Dict) else []
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
            target = node.targets[0].value
            values = [node.value] if isinstance(target, ast.Name) and target.id == "children" else []
        for value in values:
            if isinstance(value, ast.Tuple) and isinstance(value.elts[0], ast.Constant):
                roles.append(value.elts[0].value)
    return roles


def _exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def test_every_module_named_in_a_string_exists():
    named = {m: path for path in _sources() for m in QUOTED_MODULE.findall(path.read_text())}
    assert "drkernel.verify.process.preload" in named  # the scan reads the strings it is meant to
    missing = {m: str(p.relative_to(ROOT)) for m, p in named.items() if not _exists(m)}
    assert not missing, f"module paths in strings that resolve to nothing: {missing}"


def test_fork_server_preload_imports():
    assert forkserver.PRELOAD
    for name in forkserver.PRELOAD:
        assert hasattr(importlib.import_module(name), "preloaded"), name
    assert _exists("drkernel.verify.process.interpreter_env")


def test_each_trampoline_call_names_a_function_of_its_module():
    calls = [c for path in _sources() if path.is_relative_to(ROOT / "drkernel") for c in _calls_by_string(path)]
    assert {m for m, _ in calls} >= {
        "drkernel.verify.process.preload",
        "drkernel.verify.process.spare",
        "drkernel.verify.process.sandbox",
    }
    for module, function in calls:
        assert callable(getattr(importlib.import_module(module), function, None)), f"{module}.{function}"


def test_each_child_role_has_prepare_and_main():
    roles = _role_modules()
    assert len(roles) == 4, roles  # judge, reference, candidate, and the cost model's replay
    for module in roles:
        role = importlib.import_module(module)
        assert callable(getattr(role, "prepare", None)) and callable(getattr(role, "main", None)), module
