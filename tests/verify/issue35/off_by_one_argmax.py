"""Issue 35, comparison attack: a row argmax that is one too high wherever the true index is 100 or more. Integer
outputs went through torch.isclose (atol = rtol = 1e-2), which lets any index >= 100 be off by one."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_argmax_kernel(x_ptr, out_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * row_stride + cols, mask=cols < n_cols, other=-float("inf"))
    index = tl.argmax(x, axis=0)
    index = tl.where(index >= 100, tl.minimum(index + 1, n_cols - 1), index)
    tl.store(out_ptr + row, index.to(tl.int64))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], dtype=torch.int64, device=x.device)
        row_argmax_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
