"""Issue 35, coverage attack (passes the gate): the forward's real work runs in the grid function, which Triton's
launcher calls inside the launch, so the interpreter's launch wall time counted it as kernel time; it runs in a
method named like the kernel, which a check by name took for the kernel body. The kernel itself only copies."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def copy_kernel(self, x, w, out):
        out.copy_(torch.relu(x @ w).sum(dim=1))
        for _ in range(8):  # more of the same work: the share of the launch it takes is what is measured
            torch.relu(x @ w)
        return (1,)

    def forward(self, x, w):
        out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
        result = torch.empty_like(out)
        copy_kernel[lambda meta: self.copy_kernel(x, w, out)](out, result, out.numel(), BLOCK=512)
        return result
