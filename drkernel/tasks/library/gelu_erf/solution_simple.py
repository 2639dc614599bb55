import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_erf_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.erf(x * 0.7071067811865476), mask=mask)


class ModelNew(nn.Module):
    """Triton evaluates erf(x / sqrt(2)); torch does the rest of the formula."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        e = torch.empty_like(x)
        n = x.numel()
        BLOCK = 512
        scaled_erf_kernel[(triton.cdiv(n, BLOCK),)](x, e, n, BLOCK=BLOCK)
        return 0.5 * x * (1.0 + e)
