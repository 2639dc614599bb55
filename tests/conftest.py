"""Shared test paths. KernelBench lives in ../shared beside the checkout (CI puts it there)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
KERNELBENCH = REPO.parent / "shared" / "kernelbench" / "KernelBench"


@pytest.fixture(scope="session")
def kernelbench() -> Path:
    """The KernelBench problems folder; its absence is a broken checkout, not a reason to skip."""
    if not (KERNELBENCH / "level1").is_dir():
        pytest.fail(f"KernelBench not found at {KERNELBENCH}: put ../shared beside the repository")
    return KERNELBENCH
