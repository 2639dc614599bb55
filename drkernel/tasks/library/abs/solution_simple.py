import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sign_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.where(x < 0.0, -1.0, 1.0), mask=mask)


class ModelNew(nn.Module):
    """Triton writes the sign with narrow blocks; torch multiplies it back in."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        sign = torch.empty_like(x)
        n = x.numel()
        BLOCK = 128
        sign_kernel[(triton.cdiv(n, BLOCK),)](x, sign, n, BLOCK=BLOCK)
        return x * sign
