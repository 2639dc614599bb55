import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def exp_shift_kernel(x_ptr, max_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    # One row per program: exponentiate after subtracting the row max computed by torch.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    row_max = tl.load(max_ptr + row)
    tl.store(out_ptr + row * n_cols + cols, tl.exp(x - row_max), mask=mask)


class ModelNew(nn.Module):
    """Unfused: torch finds the max and the sum, Triton only does the exponentials."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        row_max = x.max(dim=1).values.contiguous()
        e = torch.empty_like(x)
        exp_shift_kernel[(n_rows,)](x, row_max, e, n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return e / e.sum(dim=1, keepdim=True)
