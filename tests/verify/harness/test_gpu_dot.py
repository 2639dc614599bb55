"""tl.dot in the interpreter with the GPU's operand precision (issue 27): the bit patterns read on an H200
(benchmarks/results/tf32_dot_h200.json), on a real interpreted kernel, and installed in the verifier's children."""

from __future__ import annotations

import numpy as np
import pytest
import torch

# isort: off
import drkernel.verify.process.interpreter_env  # noqa: F401  (before triton)
import triton
import triton.language as tl
from triton.runtime.interpreter import InterpreterBuilder

# isort: on
from drkernel.verify.harness import gpu_dot


def _f32(bits: int) -> np.float32:
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def _bits(x: np.ndarray) -> list[int]:
    return [int(b) for b in np.asarray(x, dtype=np.float32).view(np.uint32)]


@triton.jit
def dot_kernel(a, b, c, N: tl.constexpr, PRECISION: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(a + r[:, None] * N + r[None, :])
    y = tl.load(b + r[:, None] * N + r[None, :])
    tl.store(c + r[:, None] * N + r[None, :], tl.dot(x, y, input_precision=PRECISION))


@triton.jit
def default_dot_kernel(a, b, c, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(a + r[:, None] * N + r[None, :])
    y = tl.load(b + r[:, None] * N + r[None, :])
    tl.store(c + r[:, None] * N + r[None, :], tl.dot(x, y))


def test_tf32_drops_the_low_13_bits_toward_zero_and_keeps_specials():
    # 1 + 2^-10 is TF32's last mantissa bit; 1 + 2^-11 and 1 + 2^-10 + 2^-11 lie between TF32 values
    x = np.array([1 + 2**-10, 1 + 2**-11, 1 + 2**-10 + 2**-11, -(1 + 2**-11), np.inf, -np.inf], np.float32)
    assert gpu_dot.to_tf32(x).tolist() == [1 + 2**-10, 1.0, 1 + 2**-10, -1.0, np.inf, -np.inf]
    assert np.isnan(gpu_dot.to_tf32(np.array([_f32(0x7F800001)]))[0])  # payload only in dropped bits: still NaN
    # the 3xTF32 split's big part rounds to nearest, ties away from zero
    assert gpu_dot.round_tf32(x[:4]).tolist() == [1 + 2**-10, 1 + 2**-10, 1 + 2**-9, -(1 + 2**-10)]
    assert _bits(gpu_dot.round_tf32(np.array([np.inf], np.float32))) == [0x7F800000]


def test_interpreted_dot_uses_tf32_operands_only_where_the_kernel_asks_for_tf32():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(16, 16, generator=g), torch.randn(16, 16, generator=g)
    exact = a.double() @ b.double()
    ta, tb = (torch.from_numpy(gpu_dot.to_tf32(x.numpy())).double() for x in (a, b))
    truncated = ta @ tb
    before = InterpreterBuilder.create_dot
    got = {}
    with gpu_dot.emulated():
        for precision in ("tf32", "tf32x3", "ieee"):
            c = torch.empty(16, 16)
            dot_kernel[(1,)](a, b, c, N=16, PRECISION=precision)
            got[precision] = c.double()
        c = torch.empty(16, 16)
        default_dot_kernel[(1,)](a, b, c, N=16)  # Triton's default for fp32 is TF32
        got["default"] = c.double()
    assert InterpreterBuilder.create_dot is before
    assert (got["tf32"] - truncated).abs().max() < 1e-5 < (got["tf32"] - exact).abs().max()
    assert torch.equal(got["default"], got["tf32"])
    assert (got["tf32x3"] - exact).abs().max() < 1e-5 and (got["ieee"] - exact).abs().max() < 1e-5
    c = torch.empty(16, 16)
    dot_kernel[(1,)](a, b, c, N=16, PRECISION="tf32")  # outside the block: the interpreter's exact product again
    assert (c.double() - exact).abs().max() < 1e-5


@pytest.mark.parametrize("precision", ["tf32", "tf32x3"])
def test_emulation_reproduces_the_h200_conversions(precision: str):
    """A @ I shows each operand as the tensor cores read it: the H200 matched truncation (tf32) and a
    round-to-nearest big part with a truncated small part (tf32x3) on every element of a 512x512 A."""
    import json
    from pathlib import Path

    reading = json.loads(
        (Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "tf32_dot_h200.json").read_text()
    )
    seen = reading[f"{precision}_block64"]["conversion_bit_equal"]
    assert seen["truncate/truncate" if precision == "tf32" else "nearest_away/truncate"] == 1.0
    a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    got = gpu_dot.dot(a, np.eye(64, dtype=np.float32), np.zeros((64, 64), np.float32), precision)
    big = gpu_dot.to_tf32(a) if precision == "tf32" else gpu_dot.round_tf32(a)
    want = big if precision == "tf32" else big + gpu_dot.to_tf32(a - big)
    assert _bits(got.ravel()) == _bits(want.ravel())


def test_replacing_the_dot_in_the_candidates_process_is_harness_tampering():
    from drkernel.verify.harness.tamper import HarnessSnapshot

    with gpu_dot.emulated():
        snapshot = HarnessSnapshot()
        emulated = InterpreterBuilder.create_dot
        InterpreterBuilder.create_dot = lambda *args: None  # type: ignore[method-assign]
        try:
            assert "InterpreterBuilder.create_dot" in snapshot.changed()
        finally:
            InterpreterBuilder.create_dot = emulated  # type: ignore[method-assign]
        assert snapshot.changed() == []
