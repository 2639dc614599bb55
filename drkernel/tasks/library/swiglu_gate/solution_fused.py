import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def swiglu_kernel(x_ptr, out_ptr, n_rows, hidden, ROWS: tl.constexpr, BLOCK_H: tl.constexpr):
    # Both halves are read in place from the packed input; no chunk copies are made.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_H)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < hidden)
    in_row = rows[:, None] * (2 * hidden)
    gate = tl.load(x_ptr + in_row + cols[None, :], mask=mask, other=0.0)
    up = tl.load(x_ptr + in_row + hidden + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + rows[:, None] * hidden + cols[None, :], gate * tl.sigmoid(gate) * up, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows = x.shape[0]
        hidden = x.shape[1] // 2
        out = torch.empty((n_rows, hidden), device=x.device, dtype=x.dtype)
        rows = 8
        swiglu_kernel[(triton.cdiv(n_rows, rows),)](x, out, n_rows, hidden,
                                                    ROWS=rows, BLOCK_H=triton.next_power_of_2(hidden))
        return out
