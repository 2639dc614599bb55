"""Issue 35: a candidate that switches its process's fp32 matmuls to reduced precision (TF32 on a GPU), which
the gate lets through as a plain call, then adds a Triton relu. The reference runs with the defaults in its own
process; cuBLAS in TF32 is several times faster than in FP32, and within the tolerance on small inner dimensions."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o + offs, tl.maximum(tl.load(x + offs, mask=m), 0.0), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        torch.set_float32_matmul_precision("high")
        y = a @ b
        out = torch.empty_like(y)
        relu_kernel[(triton.cdiv(y.numel(), 1024),)](y, out, y.numel(), BLOCK=1024)
        return out
