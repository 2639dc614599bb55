import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_moments_kernel(x_ptr, mean_ptr, std_ptr, n_cols, BLOCK: tl.constexpr):
    # Sum and sum of squares in one chunked sweep, one row per program.
    row = tl.program_id(0)
    s1 = tl.zeros((BLOCK,), dtype=tl.float32)
    s2 = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        s1 += x
        s2 += x * x
    total = tl.sum(s1, axis=0)
    mean = total / n_cols
    var = (tl.sum(s2, axis=0) - total * mean) / (n_cols - 1)
    tl.store(mean_ptr + row, mean)
    tl.store(std_ptr + row, tl.sqrt(tl.maximum(var, 0.0)))


class ModelNew(nn.Module):
    """Row moments from Triton; the broadcast subtract/divide runs in torch."""

    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        mean = torch.empty(n_rows, device=x.device, dtype=x.dtype)
        std = torch.empty(n_rows, device=x.device, dtype=x.dtype)
        row_moments_kernel[(n_rows,)](x, mean, std, n_cols, BLOCK=128)
        return (x - mean[:, None]) / (std[:, None] + self.eps)
