"""Red team issue 34, F3 variant (elementwise, passes the gate): a list of tensors as a launch argument reaches the
body as torch tensors (the interpreter converts only tensors and tuples of them to pointers)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mul_kernel(out_ptr, T):
    C = T[2]
    C += T[0] * T[1]


class ModelNew(nn.Module):
    def forward(self, a, b):
        c = torch.zeros_like(a)
        mul_kernel[(1,)](c, [a, b, c])
        return c
