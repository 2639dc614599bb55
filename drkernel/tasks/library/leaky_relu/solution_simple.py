import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def positive_part_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    """Triton keeps the positive part; torch adds slope times the negative part."""

    def __init__(self, negative_slope):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        x = x.contiguous()
        pos = torch.empty_like(x)
        n = x.numel()
        BLOCK = 256
        positive_part_kernel[(triton.cdiv(n, BLOCK),)](x, pos, n, BLOCK=BLOCK)
        return pos + self.negative_slope * torch.clamp(x, max=0.0)
