"""`tl.dot` under the Triton interpreter, computed with the operand precision the GPU uses (issue 27).

The interpreter multiplies fp32 blocks exactly, whatever `input_precision` the kernel asked for. On an NVIDIA GPU
the default, "tf32", feeds the tensor cores operands that keep 10 of fp32's 23 mantissa bits, and the cost model
prices that dot at the TF32 rate, 7.4x fp32's on an H200. Judged in exact fp32 and priced at TF32, a kernel earned
reward on CPU that the CUDA verifier rejects (red-team finding: 5 of 5 seeds over the tolerance with TF32 inputs).
So wherever an interpreter runs candidate kernels for the verifier (its CPU children, the cost model's replay) the
dot is computed as the GPU computes it:
- "tf32": each fp32 operand reduced to TF32, products accumulated in fp32;
- "tf32x3": Triton's three-pass split: big = x rounded to TF32 (to nearest), small = x - big (read in TF32 like any
  operand); small*big + big*small + big*big, the small*small term left out;
- "ieee" and every other operand type: as the interpreter computes them.
Both were read on an H200 (benchmarks/tf32_dot_h200.py, BENCHMARKS.md), bit for bit: Triton hands the tensor cores
fp32 bits and they ignore the low 13 (truncation toward zero); the 3xTF32 split rounds `big` to nearest.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

_MASK = np.uint32(0xFFFFE000)  # sign, exponent and the 10 mantissa bits a TF32 operand keeps


def _keep_nan(x: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """A NaN whose payload lived only in the dropped bits stays a NaN (it would read as an infinity)."""
    out = bits.view(np.float32)
    return np.where(np.isnan(x) & ~np.isnan(out), np.float32(np.nan), out).astype(np.float32, copy=False)


def to_tf32(x: np.ndarray) -> np.ndarray:
    """fp32 values as a tensor core reads them in TF32 mode: the low 13 mantissa bits dropped (toward zero)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    return _keep_nan(x, x.view(np.uint32) & _MASK)


def round_tf32(x: np.ndarray) -> np.ndarray:
    """fp32 rounded to TF32, to nearest, ties away from zero (cvt.rna.tf32.f32: Triton's 3xTF32 split).
    Infinities and NaNs are left as they are."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    rounded = (bits + np.uint32(0x1000)) & _MASK
    return _keep_nan(x, np.where(np.isfinite(x), rounded, bits))


def mode(input_precision: Any) -> str:
    """ "tf32", "tf32x3" or "ieee" from the interpreter's INPUT_PRECISION value (an enum whose name says it)."""
    text = str(getattr(input_precision, "name", input_precision)).upper()
    if "IEEE" in text:
        return "ieee"
    if "X3" in text:
        return "tf32x3"
    if "TF32" in text:
        return "tf32"
    return "ieee"


def dot(a: np.ndarray, b: np.ndarray, acc: np.ndarray, precision: str) -> np.ndarray:
    """acc + a @ b for fp32 blocks, with the operands the GPU's tensor cores see under `precision`, products summed in
    the accumulator's type (fp32 on a GPU; whatever a kernel passes, the operands stay TF32)."""
    out = acc.dtype
    if precision == "tf32":
        return np.matmul(to_tf32(a), to_tf32(b), dtype=out) + acc
    if precision == "tf32x3":
        a_big, b_big = round_tf32(a), round_tf32(b)
        a_small, b_small = to_tf32(a - a_big), to_tf32(b - b_big)
        part = np.matmul(a_small, b_big, dtype=out) + np.matmul(a_big, b_small, dtype=out)
        return np.matmul(a_big, b_big, dtype=out) + part + acc
    return np.matmul(a, b, dtype=out) + acc


def install() -> None:
    """Make the interpreter's tl.dot on fp32 operands use the GPU's operand precision, for the life of the process
    (idempotent): the CPU fork-server installs it before any child forks."""
    from triton.runtime.interpreter import InterpreterBuilder, TensorHandle

    original = InterpreterBuilder.create_dot
    if getattr(original, "drkernel_gpu_dot", False):
        return

    def create_dot(builder: Any, a: Any, b: Any, d: Any, input_precision: Any, *rest: Any) -> Any:
        fp32 = str(a.dtype.scalar) == "fp32" and str(b.dtype.scalar) == "fp32"
        precision = mode(input_precision) if fp32 else "ieee"
        if precision == "ieee":
            return original(builder, a, b, d, input_precision, *rest)
        return TensorHandle(dot(a.data, b.data, d.data, precision), d.dtype.scalar)

    create_dot.drkernel_gpu_dot = True  # type: ignore[attr-defined]
    InterpreterBuilder.create_dot = create_dot  # type: ignore[method-assign]


@contextmanager
def emulated() -> Iterator[None]:
    """install() for the duration of a block, then the dot as it was (in-process replays, benchmarks, tests)."""
    from triton.runtime.interpreter import InterpreterBuilder

    before = InterpreterBuilder.create_dot
    install()
    try:
        yield
    finally:
        InterpreterBuilder.create_dot = before  # type: ignore[method-assign]
