"""The NPU environment's requirements: one pinned set (vllm-ascend's own pairing), no upstream triton beside
triton-ascend, and every other base dependency of pyproject.toml carried over unchanged."""

from __future__ import annotations

from pathlib import Path

import tomllib
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
NPU_SET = {
    "torch": "==2.10.0",
    "torch-npu": "==2.10.0.post4",
    "triton-ascend": "==3.2.2",
    "vllm": "==0.23.0",
    "vllm-ascend": "==0.23.0",
}


def _requirements() -> dict[str, Requirement]:
    lines = (ROOT / "requirements-npu.txt").read_text().splitlines()
    reqs = [Requirement(line.split("#")[0].strip()) for line in lines if line.split("#")[0].strip()]
    return {r.name: r for r in reqs}


def test_the_npu_set_is_pinned_and_replaces_triton():
    reqs = _requirements()
    assert {name: str(reqs[name].specifier) for name in NPU_SET} == NPU_SET
    assert "triton" not in reqs  # triton-ascend provides the module; upstream triton would overwrite it
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "npu" not in pyproject["project"]["optional-dependencies"]  # never combined with the base install


def test_every_other_base_dependency_is_carried_over():
    reqs = _requirements()
    base = [Requirement(d) for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    for dep in base:
        if dep.name in ("torch", "triton"):
            assert (
                dep.name == "triton" or reqs["torch"].specifier.contains("2.10.0") and dep.specifier.contains("2.10.0")
            )
            continue
        assert dep.name in reqs, f"requirements-npu.txt lacks the base dependency {dep}"
        assert (reqs[dep.name].specifier, reqs[dep.name].extras) == (dep.specifier, dep.extras), dep.name
