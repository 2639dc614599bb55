import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cross_entropy_kernel(logits_ptr, target_ptr, loss_ptr, n_rows, n_cols,
                         ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    # loss = logsumexp(row) - row[target]; the target logit is picked with a compare, not a gather.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols[None, :] < n_cols)
    x = tl.load(logits_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask, other=-float("inf"))
    row_max = tl.max(x, axis=1)
    total = tl.sum(tl.where(mask, tl.exp(x - row_max[:, None]), 0.0), axis=1)
    target = tl.load(target_ptr + rows, mask=row_ok, other=0)
    picked = tl.sum(tl.where((cols[None, :] == target[:, None]) & mask, x, 0.0), axis=1)
    tl.store(loss_ptr + rows, row_max + tl.log(total) - picked, mask=row_ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = logits.contiguous()
        targets = targets.contiguous()
        n_rows, n_cols = logits.shape
        loss = torch.empty(n_rows, device=logits.device, dtype=logits.dtype)
        rows_per_program = 8
        cross_entropy_kernel[(triton.cdiv(n_rows, rows_per_program),)](
            logits, targets, loss, n_rows, n_cols,
            ROWS=rows_per_program, BLOCK_N=triton.next_power_of_2(n_cols))
        return loss
