import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def tempered_softmax_kernel(x_ptr, out_ptr, n_rows, n_cols, inv_temp,
                            ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    # The division by the temperature is folded into the exponent.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=-float("inf")) * inv_temp
    e = tl.where(mask, tl.exp(x - tl.max(x, axis=1)[:, None]), 0.0)
    tl.store(out_ptr + offs, e / tl.sum(e, axis=1)[:, None], mask=mask)


class ModelNew(nn.Module):
    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = temperature

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        x = logits.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        rows_per_program = 2
        tempered_softmax_kernel[(triton.cdiv(n_rows, rows_per_program),)](
            x, out, n_rows, n_cols, 1.0 / self.temperature,
            ROWS=rows_per_program, BLOCK_N=triton.next_power_of_2(n_cols))
        return out
