"""Honest Triton row log-softmax for KernelBench level1/24_LogSoftmax (rows of any length, any dim): one online pass
keeps a running max and rescaled sum per lane, a second pass writes x - max - log(sum). A dim other than the last is
moved last (a reshape) and back."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def log_softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    o_row = out_ptr + row * n_cols
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        seen = m_new > -float("inf")
        safe = tl.where(seen, m_new, 0.0)
        s = s * tl.where(seen, tl.exp(m - safe), 0.0) + tl.where(seen, tl.exp(x - safe), 0.0)
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(tl.where(m > -float("inf"), s * tl.exp(m - row_max), 0.0), axis=0)
    shift = row_max + tl.log(total)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(o_row + cols, x - shift, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        moved = x.movedim(self.dim, -1).contiguous()
        out = torch.empty_like(moved)
        n_cols = moved.shape[-1]
        rows = moved.numel() // max(n_cols, 1)
        block = min(triton.next_power_of_2(n_cols), 4096)
        log_softmax_kernel[(rows,)](moved, out, n_cols, BLOCK=block)
        return out.movedim(-1, self.dim)
