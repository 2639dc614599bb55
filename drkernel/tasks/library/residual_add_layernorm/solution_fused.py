import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_layernorm_kernel(x_ptr, r_ptr, w_ptr, b_ptr, out_ptr, n_rows, n_cols, eps,
                         ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    # The sum x + residual lives only in registers; it is never written out.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < n_cols
    mask = (rows[:, None] < n_rows) & col_ok[None, :]
    offs = rows[:, None] * n_cols + cols[None, :]
    h = tl.load(x_ptr + offs, mask=mask, other=0.0) + tl.load(r_ptr + offs, mask=mask, other=0.0)
    mean = tl.sum(h, axis=1) / n_cols
    centered = tl.where(mask, h - mean[:, None], 0.0)
    rstd = tl.rsqrt(tl.sum(centered * centered, axis=1) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0.0)
    tl.store(out_ptr + offs, centered * rstd[:, None] * w[None, :] + b[None, :], mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        residual = residual.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        rows_per_program = 4
        add_layernorm_kernel[(triton.cdiv(n_rows, rows_per_program),)](
            x, residual, self.weight, self.bias, out, n_rows, n_cols, self.eps,
            ROWS=rows_per_program, BLOCK_N=triton.next_power_of_2(n_cols))
        return out
