"""The import layering README's "Style" asks for, checked as the code stands: import-linter's contracts in
pyproject.toml (drkernel/ has no Ray and imports no layer above it; serve_apps/ never imports actors/), and
benchmarks/ that import no test fixtures (they run alone, from a checkout, with no pytest)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


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
