import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def logsumexp_row_kernel(x_ptr, lse_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    m = tl.max(x, axis=0)
    tl.store(lse_ptr + row, m + tl.log(tl.sum(tl.where(mask, tl.exp(x - m), 0.0), axis=0)))


class ModelNew(nn.Module):
    """Triton gives the log-sum-exp per row; torch gathers the target logits."""

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = logits.contiguous()
        n_rows, n_cols = logits.shape
        lse = torch.empty(n_rows, device=logits.device, dtype=logits.dtype)
        logsumexp_row_kernel[(n_rows,)](logits, lse, n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return lse - logits.gather(1, targets.view(-1, 1)).squeeze(1)
