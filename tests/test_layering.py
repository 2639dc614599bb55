"""The import layering, checked as the code stands. The rule is written in pyproject.toml, as import-linter
contracts (README's Layout section says what each package holds): drkernel/ has no Ray and imports no layer above
it, serve_apps/ never imports actors/, drkernel.types is torch-free, and drkernel's own packages stand on floors
and import only downwards. Also checked here: benchmarks/ import no test fixtures (they run alone, from a checkout,
with no pytest)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert [c["name"] for c in contracts if f"{c['name']} KEPT" not in done.stdout] == []


def test_every_drkernel_package_has_a_floor():
    """The floors contract is exhaustive and names every package and top-level module of drkernel/ once."""
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (floors,) = [c for c in contracts if c["type"] == "layers" and c.get("containers") == ["drkernel"]]
    assert floors.get("exhaustive") is True
    named = [part.strip() for floor in floors["layers"] for part in floor.split("|")]
    root = REPO / "drkernel"
    present = {p.name for p in root.iterdir() if (p / "__init__.py").is_file()}
    present |= {p.stem for p in root.glob("*.py") if p.name != "__init__.py"}
    assert sorted(named) == sorted(present)
    assert floors["layers"][-1] == "types"  # what crosses layers sits below everything


def test_types_import_neither_torch_nor_the_rest_of_drkernel():
    """At run time too (import-linter sees only import statements)."""
    code = (
        "import sys, importlib, pkgutil, drkernel.types as t\n"
        "for m in pkgutil.iter_modules(t.__path__): importlib.import_module('drkernel.types.' + m.name)\n"
        "print(sorted(n for n in sys.modules if n == 'torch' or n.startswith('drkernel.') and '.types' not in n))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_benchmarks_import_no_test_fixtures():
    offenders = []
    for path in sorted((REPO / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("conftest", "tests"):
                offenders.append(f"{path.name}:{node.lineno} from {node.module}")
            elif isinstance(node, ast.Import) and any(
                a.name.split(".")[0] in ("conftest", "tests") for a in node.names
            ):
                offenders.append(f"{path.name}:{node.lineno} import")
    assert not offenders, offenders
