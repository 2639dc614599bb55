"""The task library ships inside the wheel: every task file lands at its package path."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from drkernel.tasks import library_path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("drkernel", "actors", "serve_apps", "pipelines")


@pytest.mark.integration
def test_wheel_contains_every_task_file(tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO / name).is_file():
            shutil.copy(REPO / name, src / name)
    for package in PACKAGES:
        shutil.copytree(REPO / package, src / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path / "dist"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q", "-w", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = out.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        f"drkernel/tasks/library/{p.relative_to(library_path()).as_posix()}"
        for p in library_path().rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert expected, "empty task library"
    assert expected <= names, sorted(expected - names)[:10]
    assert "drkernel/tasks/loader.py" in names
    assert "drkernel/tasks/library.parquet" in names
