import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_total_kernel(x_ptr, out_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        acc += tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    """Triton sums each row in narrow steps; torch divides by the row length."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        totals = torch.empty(n_rows, dtype=x.dtype, device=x.device)
        row_total_kernel[(n_rows,)](x, totals, n_cols, x.stride(0), BLOCK=64)
        return totals / n_cols
