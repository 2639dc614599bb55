"""A broken Ray or Serve install must fail the tests that need it, never skip them: no test file may
import-or-skip Ray/Serve or skip on a condition that names them (the session fixture ray_cluster in
tests/conftest.py imports Ray plainly for the same reason)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
SKIPPERS = {"importorskip", "skip", "skipif", "xfail"}


def ray_skips(source: str) -> list[int]:
    """Lines where a skip (importorskip / skip / skipif / xfail) names ray or serve in its arguments."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name not in SKIPPERS:
            continue
        words = " ".join(ast.unparse(a) for a in [*node.args, *(k.value for k in node.keywords)]).lower()
        if "ray" in words.replace("array", "") or "serve" in words:
            lines.append(node.lineno)
    return lines


def test_the_checker_finds_ray_skips():
    assert ray_skips("import pytest\nray = pytest.importorskip('ray')\n") == [2]
    assert ray_skips("import pytest\n@pytest.mark.skipif(not HAS_SERVE, reason='no serve')\ndef t(): ...\n") == [2]
    assert ray_skips("import pytest\npytest.skip('needs an NVIDIA GPU')\nx = pytest.importorskip('np.array')\n") == []


def test_no_test_skips_on_ray_or_serve():
    files = [*TESTS.rglob("test_*.py"), *TESTS.rglob("conftest.py")]  # other .py files there are candidates
    assert len(files) > 50
    found = {str(p.relative_to(TESTS)): ray_skips(p.read_text()) for p in files}
    assert {path: lines for path, lines in found.items() if lines} == {}
