"""Honest Triton sum over one dimension for KernelBench level1/47_Sum_reduction_over_a_dimension (any rank, any dim,
keepdim): the input is seen as (outer, R, inner); a program sums a 32 x 128 (R x inner) tile at a time down R for
128 contiguous inner positions, so every load is coalesced along the innermost axis."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_dim_kernel(x_ptr, out_ptr, R, inner, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    outer = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    col_ok = cols < inner
    base = x_ptr + outer * R * inner
    acc = tl.zeros([BLOCK_R, BLOCK_I], dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        ptrs = base + rows.to(tl.int64)[:, None] * inner + cols[None, :]
        acc += tl.load(ptrs, mask=(rows[:, None] < R) & col_ok[None, :], other=0.0).to(tl.float32)
    tl.store(out_ptr + outer * inner + cols, tl.sum(acc, axis=0), mask=col_ok)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.dim % x.dim()
        R = x.shape[dim]
        outer = 1
        for s in x.shape[:dim]:
            outer *= s
        inner = x.numel() // max(outer * R, 1)
        out_shape = list(x.shape)
        out_shape[dim] = 1
        out = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        sum_dim_kernel[(outer, triton.cdiv(inner, 128))](x, out, R, inner, BLOCK_R=32, BLOCK_I=128)
        return out
