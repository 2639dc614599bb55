"""Honest (issue 27): the tiled matmul of cpu_model_tf32_dot.py with exact fp32 operands (input_precision="ieee"),
priced at the fp32 rate."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & (k + rk < K)[None, :], other=0.0)
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :], mask=(k + rk < K)[:, None] & (rn[None, :] < N), other=0.0)
        acc = tl.dot(x, y, acc, input_precision="ieee")
    tl.store(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def forward(self, a, b):
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty(M, N, dtype=a.dtype)
        matmul_kernel[(triton.cdiv(M, 64), triton.cdiv(N, 64))](
            a.contiguous(), b.contiguous(), c, M, N, K, BM=64, BN=64, BK=32
        )
        return c
