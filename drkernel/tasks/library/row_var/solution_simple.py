import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_moments_kernel(x_ptr, sum_ptr, sumsq_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0)
    tl.store(sum_ptr + row, tl.sum(x, axis=0))
    tl.store(sumsq_ptr + row, tl.sum(x * x, axis=0))


class ModelNew(nn.Module):
    """Triton returns the raw first and second moments; torch combines them."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        s = torch.empty(n_rows, dtype=x.dtype, device=x.device)
        ss = torch.empty(n_rows, dtype=x.dtype, device=x.device)
        row_moments_kernel[(n_rows,)](x, s, ss, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols))
        return (ss - s * s / n_cols) / (n_cols - 1)
