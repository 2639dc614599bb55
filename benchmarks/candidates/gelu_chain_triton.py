"""Honest fused Triton kernel for KernelBench level1/88_MinGPTNewGelu: the whole tanh-GELU chain in one pass."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_tanh_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    z = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    tanh_z = 2.0 * tl.sigmoid(2.0 * z) - 1.0
    tl.store(out_ptr + offs, 0.5 * x * (1.0 + tanh_z), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        gelu_tanh_kernel[(triton.cdiv(n, 2048),)](x, out, n, BLOCK=2048)
        return out
