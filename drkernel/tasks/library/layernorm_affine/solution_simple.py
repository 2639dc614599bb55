import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def normalize_kernel(x_ptr, mean_ptr, rstd_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    # One row per program; mean and 1/std come precomputed from torch.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    tl.store(out_ptr + row * n_cols + cols, (x - mean) * rstd, mask=mask)


class ModelNew(nn.Module):
    """Statistics and the affine map in torch; only the normalization runs in Triton."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        mean = x.mean(dim=1).contiguous()
        rstd = torch.rsqrt(x.var(dim=1, unbiased=False) + self.eps).contiguous()
        normed = torch.empty_like(x)
        normalize_kernel[(n_rows,)](x, mean, rstd, normed, n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return normed * self.weight + self.bias
