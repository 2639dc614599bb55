import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_max_kernel(x_ptr, out_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    tl.store(out_ptr + row, tl.max(x, axis=0))


class ModelNew(nn.Module):
    """min(x) = -max(-x): torch negates before and after a Triton row maximum."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        negated = (-x).contiguous()
        n_rows, n_cols = negated.shape
        out = torch.empty(n_rows, dtype=x.dtype, device=x.device)
        row_max_kernel[(n_rows,)](negated, out, n_cols, negated.stride(0), BLOCK=triton.next_power_of_2(n_cols))
        return -out
