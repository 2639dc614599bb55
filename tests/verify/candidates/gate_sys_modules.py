"""Patches the harness through sys.modules. Expect: forbidden (import of sys)."""

import sys
import torch
import torch.nn as nn
import triton
import triton.language as tl

_harness = sys.modules.get('drkernel.verify.harness.candidate_process')


@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x + y, 0.0), mask=mask)


def add_relu(x, y):
    out = torch.empty_like(x)
    add_relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return add_relu(x, y)
