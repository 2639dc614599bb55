"""Red team (issue 13 review): a correct matmul through F.bilinear (aten::_trilinear at dispatch, no flop formula
in the CPU cost model) next to a token Triton launch. Modelled speedup 2.4x over torch.matmul (honest: 0.9x)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
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
        ones = torch.ones(a.shape[0], 1)
        out = F.bilinear(a, ones, b.t().unsqueeze(2))
        touch_kernel[(1,)](out, out.numel(), BLOCK=16)
        return out
