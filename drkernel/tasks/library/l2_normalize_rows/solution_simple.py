import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def divide_rows_kernel(x_ptr, norm_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    norm = tl.load(norm_ptr + row)
    tl.store(out_ptr + row * n_cols + cols, x / norm, mask=mask)


class ModelNew(nn.Module):
    """Norms come from torch; Triton divides, one row per program."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        norms = torch.linalg.vector_norm(x, dim=1).clamp_min(1e-12).contiguous()
        out = torch.empty_like(x)
        divide_rows_kernel[(n_rows,)](x, norms, out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return out
