"""Honest Triton RMSNorm for KernelBench level1/36_RMSNorm_ (x of shape (batch, features, *), any sizes): the mean of
squares runs over the strided feature axis, so a program owns 256 contiguous spatial positions of one batch item,
accumulates their sum of squares over all features, then rereads its (cache-resident) tile to write x / rms."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, out_ptr, F, inner, eps, BLOCK_F: tl.constexpr, BLOCK_I: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    col_ok = cols < inner
    base = b * F * inner
    acc = tl.zeros([BLOCK_F, BLOCK_I], dtype=tl.float32)
    for f0 in range(0, F, BLOCK_F):
        f = f0 + tl.arange(0, BLOCK_F)
        offs = base + f.to(tl.int64)[:, None] * inner + cols[None, :]
        x = tl.load(x_ptr + offs, mask=(f[:, None] < F) & col_ok[None, :], other=0.0).to(tl.float32)
        acc += x * x
    rms = tl.sqrt(tl.sum(acc, axis=0) / F + eps)
    for f0 in range(0, F, BLOCK_F):
        f = f0 + tl.arange(0, BLOCK_F)
        offs = base + f.to(tl.int64)[:, None] * inner + cols[None, :]
        mask = (f[:, None] < F) & col_ok[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + offs, x / rms[None, :], mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        batch, F = x.shape[0], x.shape[1]
        inner = x.numel() // max(batch * F, 1)
        out = torch.empty_like(x)
        rmsnorm_kernel[(batch, triton.cdiv(inner, 256))](x, out, F, inner, self.eps, BLOCK_F=16, BLOCK_I=256)
        return out
