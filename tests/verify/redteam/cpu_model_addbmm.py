"""Red team (issue 13 review): a correct matmul through torch.addbmm, an operator the CPU cost model prices by
bytes only (no flop formula), next to a token Triton launch. Modelled speedup 2.1x over torch.matmul (honest: 0.9x)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(out_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, v, mask=mask)


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.addbmm(torch.zeros(a.shape[0], b.shape[1]), a.unsqueeze(0), b.unsqueeze(0), beta=0)
        touch_kernel[(1,)](out, out.numel(), BLOCK=16)
        return out
