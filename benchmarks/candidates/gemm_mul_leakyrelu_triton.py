"""Honest Triton GEMM with a fused epilogue for KernelBench level2/12_Gemm_Multiply_LeakyReLU (any sizes):
y = leaky_relu((x @ W^T + b) * multiplier) in one kernel, the bias, scale and activation applied to the fp32
accumulator before the only store (PyTorch makes three passes over the output). W and b are the nn.Linear the
reference builds, created the same way so the seeded init matches; tl.dot runs in TF32 on a GPU."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gemm_epilogue_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, sxm, sxk, swn, swk, sym, syn, multiplier, slope,
                         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + rk
        a = tl.load(x_ptr + rm[:, None] * sxm + ks[None, :] * sxk,
                    mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        w = tl.load(w_ptr + ks[:, None] * swk + rn[None, :] * swn, mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, w, acc)
    acc = (acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]) * multiplier
    acc = tl.where(acc >= 0, acc, acc * slope)
    tl.store(y_ptr + rm[:, None] * sym + rn[None, :] * syn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        M, K = x.shape
        w = self.gemm.weight
        N = w.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=torch.float32)
        grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
        gemm_epilogue_kernel[grid](x, w, self.gemm.bias, y, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                                   y.stride(0), y.stride(1), self.multiplier, self.negative_slope,
                                   BM=128, BN=128, BK=32, GROUP_M=8, num_warps=8, num_stages=3)
        return y
