"""Honest Triton row softmax for KernelBench level1/23_Softmax (rows of any length): online max/sum pass, then a write pass."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride
    o_row = out_ptr + row * stride
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        seen = m_new > -float("inf")  # lanes that have met at least one real value
        alpha = tl.where(seen, tl.exp(m - tl.where(seen, m_new, 0.0)), 0.0)
        p = tl.where(seen, tl.exp(x - tl.where(seen, m_new, 0.0)), 0.0)
        s = s * alpha + p
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(tl.where(m > -float("inf"), s * tl.exp(m - row_max), 0.0), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(o_row + cols, tl.exp(x - row_max) / total, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        rows, cols = x.shape
        block = min(triton.next_power_of_2(cols), 4096)
        softmax_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=block)
        return out
