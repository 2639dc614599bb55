import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def positive_mask_kernel(x_ptr, mask_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(mask_ptr + offsets, tl.where(x > 0.0, 1.0, 0.0), mask=mask)


class ModelNew(nn.Module):
    """Triton builds a 0/1 mask with small blocks; torch multiplies it in."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        keep = torch.empty_like(x)
        n = x.numel()
        BLOCK = 256
        positive_mask_kernel[(triton.cdiv(n, BLOCK),)](x, keep, n, BLOCK=BLOCK)
        return x * keep
