import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def standardize_kernel(x_ptr, out_ptr, n_rows, n_cols, eps, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    # Reduction and broadcast in one program: mean, unbiased std, then the normalized row.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    mean = tl.sum(x, axis=1) / n_cols
    d = tl.where(mask, x - mean[:, None], 0.0)
    std = tl.sqrt(tl.sum(d * d, axis=1) / (n_cols - 1))
    tl.store(out_ptr + offs, d / (std[:, None] + eps), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        rows = 8
        standardize_kernel[(triton.cdiv(n_rows, rows),)](
            x, out, n_rows, n_cols, self.eps, ROWS=rows, BLOCK_N=triton.next_power_of_2(n_cols))
        return out
