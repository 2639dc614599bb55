import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_squares_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_elements, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
        acc += x * x
    tl.store(out_ptr, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    """A single program streams the tensor and keeps a vector accumulator."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty((), dtype=x.dtype, device=x.device)
        sum_squares_kernel[(1,)](x, out, x.numel(), BLOCK=1024)
        return out
