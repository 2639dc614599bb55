import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_row_kernel(a_ptr, b_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = row * n_cols
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        a = tl.load(a_ptr + base + cols, mask=mask, other=0.0)
        b = tl.load(b_ptr + base + cols, mask=mask, other=0.0)
        tl.store(out_ptr + base + cols, a + b, mask=mask)


class ModelNew(nn.Module):
    """One program per row walking it in narrow 64-wide steps."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a = a.contiguous()
        b = b.contiguous()
        out = torch.empty_like(a)
        n_cols = a.shape[-1]
        n_rows = a.numel() // n_cols
        add_row_kernel[(n_rows,)](a, b, out, n_cols, BLOCK=64)
        return out
