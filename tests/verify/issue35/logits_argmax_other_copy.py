"""Issue 35, red-team note N2: an honest index over computed logits that picks the other of two tied classes (the
logits of classes j and j + 32 are equal, up to the order of a sum). The index is not into an input, so accepting it
needs the logits the reference's argmax was given."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def other_copy_kernel(idx_ptr, out_ptr, n, HALF: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    i = tl.load(idx_ptr + offs, mask=m)
    tl.store(out_ptr + offs, (i + HALF) % (2 * HALF), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        w = torch.randn(64, 32)
        self.register_buffer("w", torch.cat([w, w], dim=1))

    def forward(self, x):
        idx = torch.argmax(x @ self.w, dim=1)
        out = torch.empty_like(idx)
        other_copy_kernel[(1,)](idx, out, idx.numel(), HALF=32, BLOCK=triton.next_power_of_2(idx.numel()))
        return out
