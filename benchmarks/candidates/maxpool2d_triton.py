"""Honest Triton 2-D max pooling for KernelBench level1/42_Max_Pooling_2D (any kernel size, stride, padding,
dilation; floor mode like nn.MaxPool2d's default): a program owns 1024 output positions of one (batch, channel)
plane and takes the max over the window, padded taps reading -inf."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def maxpool2d_kernel(x_ptr, out_ptr, H, W, H_out, W_out, stride, padding, dilation, KS: tl.constexpr,
                     BLOCK: tl.constexpr):
    plane = tl.program_id(0).to(tl.int64)
    idx = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = idx < H_out * W_out
    oh = idx // W_out
    ow = idx % W_out
    x_plane = x_ptr + plane * H * W
    acc = tl.full([BLOCK], -float("inf"), tl.float32)
    for kh in tl.static_range(KS):
        ih = oh * stride - padding + kh * dilation
        row_ok = ok & (ih >= 0) & (ih < H)
        for kw in tl.static_range(KS):
            iw = ow * stride - padding + kw * dilation
            tap_ok = row_ok & (iw >= 0) & (iw < W)
            v = tl.load(x_plane + ih * W + iw, mask=tap_ok, other=-float("inf")).to(tl.float32)
            acc = tl.maximum(acc, v)
    tl.store(out_ptr + plane * H_out * W_out + idx, acc, mask=ok)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, C, H, W = x.shape
        k, s, p, d = self.kernel_size, self.stride, self.padding, self.dilation
        H_out = (H + 2 * p - d * (k - 1) - 1) // s + 1
        W_out = (W + 2 * p - d * (k - 1) - 1) // s + 1
        out = torch.empty((B, C, H_out, W_out), device=x.device, dtype=x.dtype)
        grid = (B * C, triton.cdiv(H_out * W_out, 1024))
        maxpool2d_kernel[grid](x, out, H, W, H_out, W_out, s, p, d, KS=k, BLOCK=1024)
        return out
