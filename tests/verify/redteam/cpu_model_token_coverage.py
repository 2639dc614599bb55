"""Red team (issue 27): the matmul in eager PyTorch beside a 16-element Triton copy. Under `timing: cpu_model` the
coverage was the interpreter's share of CPU wall time (0.36 on a 512^3 matmul on a loaded 2-core box, near 1.0 where
torch is fast), worth up to +0.5 reward for a kernel that does none of the work."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(out_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.matmul(a, b)
        touch_kernel[(1,)](out, 16, BLOCK=16)
        return out
