"""The honest counterpart of stage_work.py / grid_work.py: torch's matmul, then a Triton kernel that applies relu
and sums each row."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_rowsum_kernel(y, out, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(y + row * n + offs, mask=offs < n, other=0.0)
    tl.store(out + row, tl.sum(tl.maximum(v, 0.0), axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, w):
        y = x @ w
        out = torch.empty(y.shape[0], dtype=y.dtype, device=y.device)
        relu_rowsum_kernel[(y.shape[0],)](y, out, y.shape[1], BLOCK=triton.next_power_of_2(y.shape[1]))
        return out
