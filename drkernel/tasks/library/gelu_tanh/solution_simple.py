import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def tanh_kernel(u_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    u = tl.load(u_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, 2.0 / (1.0 + tl.exp(-2.0 * u)) - 1.0, mask=mask)


class ModelNew(nn.Module):
    """Torch forms the cubic argument and the final product; Triton only does the tanh."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        inner = (0.7978845608028654 * (x + 0.044715 * x * x * x)).contiguous()
        t = torch.empty_like(inner)
        n = inner.numel()
        BLOCK = 512
        tanh_kernel[(triton.cdiv(n, BLOCK),)](inner, t, n, BLOCK=BLOCK)
        return 0.5 * x * (1.0 + t)
