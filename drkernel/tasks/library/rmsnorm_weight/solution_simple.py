import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mean_square_kernel(x_ptr, ms_ptr, n_cols, BLOCK: tl.constexpr):
    # One row per program, walked in small chunks.
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        acc += x * x
    tl.store(ms_ptr + row, tl.sum(acc, axis=0) / n_cols)


class ModelNew(nn.Module):
    """Triton reduces the mean square per row; the scaling is done in torch."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        ms = torch.empty(n_rows, device=x.device, dtype=x.dtype)
        mean_square_kernel[(n_rows,)](x, ms, n_cols, BLOCK=64)
        return x * torch.rsqrt(ms + self.eps)[:, None] * self.weight
