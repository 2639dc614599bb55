import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def affine_tanh_clamp_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n, dim, lo, hi, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    col = offs % dim
    h = tl.load(x_ptr + offs, mask=mask, other=0.0) * tl.load(w_ptr + col, mask=mask, other=0.0) \
        + tl.load(b_ptr + col, mask=mask, other=0.0)
    # tanh(h) = 1 - 2 / (exp(2h) + 1): saturates to +-1 without NaN when exp overflows.
    t = 1.0 - 2.0 / (tl.exp(2.0 * h) + 1.0)
    tl.store(out_ptr + offs, tl.minimum(tl.maximum(t, lo), hi), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim))
        self.bias = nn.Parameter(0.5 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        block = 4096
        affine_tanh_clamp_kernel[(triton.cdiv(n, block),)](
            x, self.weight, self.bias, out, n, x.shape[-1], -0.5, 0.5, BLOCK=block)
        return out
