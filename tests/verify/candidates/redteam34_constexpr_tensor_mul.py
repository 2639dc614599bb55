"""Red team issue 34, F3 (elementwise form, passes the gate): torch tensors handed to tl.constexpr parameters reach
the body as themselves, so `C += A * B` is a torch multiply the replay's Triton counter never sees."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mul_kernel(out_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    C += A * B


class ModelNew(nn.Module):
    def forward(self, a, b):
        c = torch.zeros_like(a)
        mul_kernel[(1,)](c, A=a, B=b, C=c)
        return c
