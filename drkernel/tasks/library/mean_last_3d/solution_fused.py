import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mean_last_kernel(x_ptr, out_ptr, length, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < length
    x = tl.load(x_ptr + row * length + offs, mask=mask, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0) / length)


class ModelNew(nn.Module):
    """Treats the leading dimensions as rows: one program per (batch, channel)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        length = x.shape[-1]
        out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
        n_rows = out.numel()
        mean_last_kernel[(n_rows,)](x, out, length, BLOCK=triton.next_power_of_2(length))
        return out
