"""Issue 35: a candidate that changes its process's floating-point switches (fp32 matmul precision, TF32) is harness
tampering: its arithmetic is not the one it is compared and timed against. On this CPU "high" changes no result, so
only the judge's own check can see it (red on 92950bf: correct, reward 1.08; "medium" moves oneDNN to bf16 and
fails the comparison); on CUDA test_numerics_switch_gpu.py holds the comparison to it as well."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkernel.rl.rewards import RewardConfig, score
from drkernel.verify import VerifyOptions
from drkernel.verify.engine import Verifier
from drkernel.verify.harness.runner import numerics

pytestmark = pytest.mark.integration

HERE = Path(__file__).parents[1] / "issue35"
REFERENCE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)

def get_inputs():
    return [torch.randn(64, 128), torch.randn(128, 64)]

def get_init_inputs():
    return []
"""
OPTS = VerifyOptions(device="cpu", num_correct_trials=1, measure_performance=False, measure_coverage=False)


def test_switching_fp32_matmul_precision_is_harness_tampering() -> None:
    switch = (HERE / "numerics_switch.py").read_text()
    honest = switch.replace('        torch.set_float32_matmul_precision("high")\n', "")
    assert honest != switch and "torch.get_float32_matmul_precision()" in numerics()
    with Verifier(device="cpu", max_concurrency=1) as verifier:
        gated = verifier.verify(REFERENCE, switch, OPTS)
        r = verifier._verify_ungated(REFERENCE, switch, OPTS)  # the judge's own check, not leaning on the gate
        plain = verifier.verify(REFERENCE, honest, OPTS)
    assert gated.hack == "forbidden_api" and score(gated, RewardConfig()) == 0.0  # issue 34's gate refuses it
    assert r.status == "ok" and r.hack == "harness_tampering", (r.correct, r.hack, r.error)
    assert score(r, RewardConfig()) == 0.0
    tampering = next(c for c in r.checks if c.name == "harness_integrity")
    assert "float32_matmul_precision" in tampering.detail, tampering.detail
    assert plain.status == "ok" and plain.correct and plain.hack is None, (plain.hack, plain.error)
