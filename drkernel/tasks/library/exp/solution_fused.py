import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def exp_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    # exp(x) = 2^(x * log2(e)); exp2 maps to a single hardware instruction on GPUs
    tl.store(out_ptr + offsets, tl.exp2(x * 1.4426950408889634), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 1024
        exp_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
        return out
