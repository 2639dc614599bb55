"""Red team (issue 13 review): a kernel whose cpu_model trace fails (a literal read from the data on the host), made
infra_error by a committed module-level tensor (state bytes in the trace payload) large enough that the replay child
runs out of address space before any candidate code runs there, where every exception is reported as the
reference's failure. The test scales BALLAST up."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BALLAST = torch.zeros(1 << 20, dtype=torch.uint8)


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 65536),)](x, out, x.numel(), BLOCK=65536)
        # a literal read from the data on the host: replayed on other inputs it is wrong (a cpu_model fail)
        return out + BALLAST[0].float() * 0.0 + float(x[0]) - x[0]
