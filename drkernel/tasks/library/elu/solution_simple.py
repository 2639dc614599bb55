import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def expm1_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.exp(tl.minimum(x, 0.0)) - 1.0, mask=mask)


class ModelNew(nn.Module):
    """Triton evaluates exp(min(x, 0)) - 1 everywhere; torch selects and scales."""

    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        x = x.contiguous()
        em1 = torch.empty_like(x)
        n = x.numel()
        BLOCK = 256
        expm1_kernel[(triton.cdiv(n, BLOCK),)](x, em1, n, BLOCK=BLOCK)
        return torch.where(x > 0, x, self.alpha * em1)
