import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_logsumexp_kernel(x_ptr, lse_ptr, n_cols, BLOCK: tl.constexpr):
    # Streams one row in chunks with a running max and rescaled running sum.
    row = tl.program_id(0)
    run_max = -float("inf")
    run_sum = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
        new_max = tl.maximum(run_max, tl.max(x, axis=0))
        run_sum = run_sum * tl.exp(run_max - new_max) + tl.sum(tl.where(mask, tl.exp(x - new_max), 0.0), axis=0)
        run_max = new_max
    tl.store(lse_ptr + row, run_max + tl.log(run_sum))


class ModelNew(nn.Module):
    """Triton computes each row's log-sum-exp; the subtraction is left to torch."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        lse = torch.empty(n_rows, device=x.device, dtype=x.dtype)
        row_logsumexp_kernel[(n_rows,)](x, lse, n_cols, BLOCK=128)
        return x - lse[:, None]
