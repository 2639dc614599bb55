import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def channel_sum_kernel(x_ptr, out_ptr, length, batch_stride, channel_stride, n_channels,
                       BLOCK: tl.constexpr):
    b = tl.program_id(0)
    c = tl.program_id(1)
    base = b * batch_stride + c * channel_stride
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, length, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < length
        acc += tl.load(x_ptr + base + offs, mask=mask, other=0.0)
    tl.store(out_ptr + b * n_channels + c, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    """A 2D grid summing in 64-wide steps; torch divides afterwards."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        batch, channels, length = x.shape
        sums = torch.empty(batch, channels, dtype=x.dtype, device=x.device)
        channel_sum_kernel[(batch, channels)](
            x, sums, length, x.stride(0), x.stride(1), channels, BLOCK=64
        )
        return sums / length
