"""Issue 35, item 6 (CUDA only): a numerics-switch candidate judged on a GPU. Switching fp32 matmuls to TF32 / bf16
(a call the gate lets through, or an assignment with the gate bypassed) must earn nothing: the judge's own check
(harness tampering) or the comparison against the reference's FP32 matmul catches it. With a 4096-long inner
dimension a TF32 product misses atol = rtol = 1e-2 on many elements near zero, so the comparison alone catches it
too. Also a CUDA staging attack: GPU work queued on "stage" and left running is the candidate's staging time.
Run on the H200: `pytest -m gpu tests/verify/harness/test_numerics_switch_gpu.py`."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU", allow_module_level=True)

from drkernel.rl.rewards import RewardConfig, score  # noqa: E402
from drkernel.verify import Verifier, VerifyOptions  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.integration]

HERE = Path(__file__).parents[1] / "issue35"
REFERENCE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)

def get_inputs():
    return [torch.randn(1024, 4096), torch.randn(4096, 1024)]

def get_init_inputs():
    return []
"""
SWITCH = (HERE / "numerics_switch.py").read_text()
HONEST = SWITCH.replace('        torch.set_float32_matmul_precision("high")\n', "")
ASSIGNED = SWITCH.replace(
    '        torch.set_float32_matmul_precision("high")\n', "        torch.backends.cuda.matmul.allow_tf32 = True\n"
)
OPTS = VerifyOptions(device="cuda", num_correct_trials=3, num_perf_trials=10, timeout_s=300)


def test_a_numerics_switch_earns_nothing_on_cuda() -> None:
    with Verifier(device="cuda", max_concurrency=1) as verifier:
        honest = verifier.verify(REFERENCE, HONEST, OPTS)
        assert honest.status == "ok" and honest.correct and honest.hack is None, (honest.hack, honest.error)
        for name, result in (
            ("set_float32_matmul_precision", verifier.verify(REFERENCE, SWITCH, OPTS)),
            ("allow_tf32 (gate bypassed)", verifier._verify_ungated(REFERENCE, ASSIGNED, OPTS)),
        ):
            assert result.status == "ok", (name, result.error)
            assert not result.correct or result.hack is not None, (name, result.speedup)
            assert score(result, RewardConfig()) == 0.0, (name, result.hack, result.error)


def test_the_comparison_alone_fails_a_tf32_product_of_this_size() -> None:
    """What the comparison sees if the switch went unnoticed: cuBLAS TF32 against FP32 on the reference's shapes."""
    from drkernel.verify.judging import tensors

    a, b = torch.randn(1024, 4096, device="cuda"), torch.randn(4096, 1024, device="cuda")
    exact = torch.relu(a @ b)
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        fast = torch.relu(a @ b)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
    ok, message, _ = tensors.compare([exact], [fast], 1e-2, 1e-2)
    assert not ok, message


def test_gpu_work_queued_on_staging_is_charged() -> None:
    """stage_async_gpu.py queues relu(a @ b) on "stage" without a sync and copies the answer in the timed forward; it
    computes what the reference computes, so its time per call (staging charged) cannot be far below the
    reference's. The figure is a ratio of times on one GPU; 2x leaves room for noise, the attack gains far more."""
    opts = OPTS.model_copy(update={"measure_coverage": False})
    with Verifier(device="cuda", max_concurrency=1) as verifier:
        r = verifier._verify_ungated(REFERENCE, (HERE / "stage_async_gpu.py").read_text(), opts)
    assert r.status == "ok" and r.correct, r.error
    assert r.speedup < 2.0, (r.speedup, r.details.get("stage_ms"), r.details.get("rounds_ms"))
