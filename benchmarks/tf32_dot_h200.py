"""How a GPU's Triton `tl.dot` reduces fp32 operands to TF32, against the CPU emulation (issue 27).

Run on a CUDA machine (compiled Triton, not the interpreter). Two readings per input precision:
- conversion: C = A @ I with A random fp32 (and I @ B): every product is x * 1 and every sum adds zeros, so C shows
  each operand exactly as the tensor cores read it; compared bit for bit with truncation (toward zero), round to
  nearest even and round to nearest away, and with drkernel.verify.harness.gpu_dot.dot;
- error: a random 512x512x512 product (the red team's shape), max |GPU - fp64| and |emulation - fp64|, and the
  max |GPU - emulation|, for the emulations above.
Prints one JSON object (and writes it to --out).

    python benchmarks/tf32_dot_h200.py --out benchmarks/results/tf32_dot_h200.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[1]
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a dry run under TRITON_INTERPRET=1


def _load_gpu_dot():
    """drkernel/verify/harness/gpu_dot.py by path (numpy only: the GPU image need not hold the package's other
    needs)."""
    spec = importlib.util.spec_from_file_location("gpu_dot", ROOT / "drkernel" / "verify" / "harness" / "gpu_dot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@triton.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(x, y, acc, input_precision=PREC)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


def gpu_matmul(a: np.ndarray, b: np.ndarray, prec: str, block: int) -> np.ndarray:
    ta, tb = torch.from_numpy(a).to(DEVICE), torch.from_numpy(b).to(DEVICE)
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty(m, n, device=DEVICE, dtype=torch.float32)
    matmul_kernel[(m // block, n // block)](ta, tb, c, m, n, k, BM=block, BN=block, BK=32, PREC=prec, num_warps=4)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return c.cpu().numpy()


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)


def truncate(x: np.ndarray) -> np.ndarray:
    return (_bits(x) & np.uint32(0xFFFFE000)).view(np.float32)


def nearest_even(x: np.ndarray) -> np.ndarray:
    b = _bits(x)
    return ((b + np.uint32(0xFFF) + ((b >> np.uint32(13)) & np.uint32(1))) & np.uint32(0xFFFFE000)).view(np.float32)


def nearest_away(x: np.ndarray) -> np.ndarray:
    return ((_bits(x) + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


ROUNDINGS = {"truncate": truncate, "nearest_even": nearest_even, "nearest_away": nearest_away}


def emulate(a: np.ndarray, b: np.ndarray, prec: str, big, small) -> np.ndarray:
    if prec == "ieee":
        return np.matmul(a, b, dtype=np.float32)
    if prec == "tf32":
        return np.matmul(big(a), big(b), dtype=np.float32)
    ab, bb = big(a), big(b)
    return np.matmul(ab, bb, dtype=np.float32) + (
        np.matmul(small(a - ab), bb, dtype=np.float32) + np.matmul(ab, small(b - bb), dtype=np.float32)
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="")
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--blocks", default="16,64,128")
    args = parser.parse_args()
    gpu_dot = _load_gpu_dot()
    rng = np.random.default_rng(0)
    report = {
        "device": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu (interpreter)",
        "triton": triton.__version__,
        "torch": torch.__version__,
    }
    n = args.n
    eye = np.eye(n, dtype=np.float32)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    with torch.no_grad():  # the reference as eager PyTorch computes it (TF32 off by default)
        eager = (torch.from_numpy(a).to(DEVICE) @ torch.from_numpy(b).to(DEVICE)).cpu().numpy()
    report["torch_mm_fp32_max_abs_err_vs_fp64"] = float(np.abs(eager - exact).max())
    for prec in ("tf32", "tf32x3", "ieee"):
        for block in (int(x) for x in args.blocks.split(",")):
            row: dict = {}
            seen = gpu_matmul(a, eye, prec, block)  # A as the tensor cores read it
            seen_b = gpu_matmul(eye, b, prec, block)
            variants = {
                f"{big}/{small}": (ROUNDINGS[big], ROUNDINGS[small]) for big in ROUNDINGS for small in ROUNDINGS
            }
            if prec != "tf32x3":
                variants = {k: v for k, v in variants.items() if k.split("/")[1] == "truncate"}
            row["conversion_bit_equal"] = {
                name: float(
                    (_bits(seen) == _bits(emulate(a, eye, prec, *f))).mean() / 2
                    + (_bits(seen_b) == _bits(emulate(eye, b, prec, *f))).mean() / 2
                )
                for name, f in variants.items()
            }
            mine = gpu_dot.dot(a, eye, np.zeros((n, n), np.float32), prec)
            row["conversion_bit_equal"]["drkernel.gpu_dot"] = float((_bits(seen) == _bits(mine)).mean())
            got = gpu_matmul(a, b, prec, block)
            row["max_abs_err_gpu_vs_fp64"] = float(np.abs(got - exact).max())
            row["max_abs_gpu_vs_emulation"] = {
                name: float(np.abs(got - emulate(a, b, prec, *f)).max()) for name, f in variants.items()
            }
            row["max_abs_gpu_vs_drkernel"] = float(
                np.abs(got - gpu_dot.dot(a, b, np.zeros((n, n), np.float32), prec)).max()
            )
            row["max_abs_err_drkernel_vs_fp64"] = float(
                np.abs(gpu_dot.dot(a, b, np.zeros((n, n), np.float32), prec) - exact).max()
            )
            tol = 1e-2 + 1e-2 * np.abs(exact)
            row["elements_over_1e-2_gpu"] = int((np.abs(got - exact) > tol).sum())
            tol = 1e-2 + 1e-2 * np.abs(eager)
            row["elements_over_1e-2_vs_torch_mm"] = int((np.abs(got - eager) > tol).sum())
            report[f"{prec}_block{block}"] = row
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
