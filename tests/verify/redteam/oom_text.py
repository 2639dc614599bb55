"""Red team (issue 8 review): a wrong kernel whose fault text says "out of memory" without using any memory.
On an accelerator the engine re-runs any evaluation whose error message contains that text with the device
to itself (every other evaluation drained first); the candidate chooses the text."""

import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, y):
        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")
