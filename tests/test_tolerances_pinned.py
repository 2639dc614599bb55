"""atol and rtol each do their own job in the verifier's comparison (every other test sets atol == rtol).

A candidate off by a relative 0.3% passes only when rtol is the loose one; a candidate off by an absolute
0.005 passes (KernelBench mode) only when atol is the loose one. Swapping the two anywhere between
VerifyOptions and the comparison turns both verdicts around. Real Verifier, real Triton kernel on CPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from drkernel.verify import Verifier, VerifyOptions

REFERENCE = (Path(__file__).resolve().parents[1] / "examples" / "vector_add" / "reference.py").read_text()

CANDIDATE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def off_add_kernel(a_ptr, b_ptr, out_ptr, n, scale, shift, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    s = tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, s * scale + shift, mask=mask)


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(a)
        n = a.numel()
        off_add_kernel[(triton.cdiv(n, 1024),)](a, b, out, n, SCALE, SHIFT, BLOCK=1024)
        return out
"""


def candidate(scale: float, shift: float) -> str:
    return CANDIDATE.replace("SCALE", repr(scale)).replace("SHIFT", repr(shift))


@pytest.fixture(scope="module")
def verifier():
    with Verifier(device="cpu", max_concurrency=2) as v:
        yield v


def options(**kw) -> VerifyOptions:
    return VerifyOptions(measure_performance=False, measure_coverage=False, **kw)


@pytest.mark.parametrize(
    ("scale", "shift", "mode", "loose", "tight"),
    [
        # |c - r| = 0.003 |r|: within rtol 1e-2 everywhere; not within atol 1e-2 where |r| > 3.3 (randn
        # sums of 4096 have dozens), and its relative L2 error 3e-3 exceeds an rtol of 0 (strict mode)
        (1.003, 0.0, "strict", "rtol", "atol"),
        # |c - r| = 0.005: within atol 1e-2 everywhere; within 1e-4 + 1e-2 |r| only where |r| >= 0.49
        (1.0, 0.005, "kernelbench", "atol", "rtol"),
    ],
)
def test_each_tolerance_does_its_own_job(verifier, scale, shift, mode, loose, tight):
    source = candidate(scale, shift)
    tight_value = 0.0 if mode == "strict" else 1e-4
    right = verifier.verify(REFERENCE, source, options(correctness=mode, **{loose: 1e-2, tight: tight_value}))
    assert right.status == "ok" and right.correct, right.error
    swapped = verifier.verify(REFERENCE, source, options(correctness=mode, **{tight: 1e-2, loose: tight_value}))
    assert swapped.status == "ok" and not swapped.correct
    assert swapped.error is not None and swapped.error.kind == "output_mismatch", swapped.error


def test_strict_scale_check_uses_rtol_not_atol(verifier):
    """Relative L2 error 3e-3: an atol wide enough for every element does not excuse it, an rtol does."""
    source = candidate(1.003, 0.0)
    wide_atol = verifier.verify(REFERENCE, source, options(atol=1.0, rtol=1e-3))
    assert wide_atol.status == "ok" and not wide_atol.correct
    assert wide_atol.error is not None and wide_atol.error.kind == "output_mismatch", wide_atol.error
    wide_rtol = verifier.verify(REFERENCE, source, options(atol=1e-3, rtol=1.0))
    assert wide_rtol.status == "ok" and wide_rtol.correct, wide_rtol.error
