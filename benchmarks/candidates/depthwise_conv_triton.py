"""Honest direct Triton depthwise convolution for KernelBench level1/82_conv_depthwise_2D_square_input_square_kernel
(any stride, padding, kernel size; optional bias): a program owns 1024 output positions of one (batch, channel) plane
and accumulates kernel_size^2 taps of that channel's filter in fp32. The weights are the nn.Conv2d the reference
builds, created the same way so the seeded init matches."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def depthwise_conv_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, C, H, W, H_out, W_out, stride, padding,
                          KS: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    plane = tl.program_id(0).to(tl.int64)
    c = plane % C
    idx = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = idx < H_out * W_out
    oh = idx // W_out
    ow = idx % W_out
    x_plane = x_ptr + plane * H * W
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for kh in tl.static_range(KS):
        ih = oh * stride - padding + kh
        row_ok = ok & (ih >= 0) & (ih < H)
        for kw in tl.static_range(KS):
            iw = ow * stride - padding + kw
            tap_ok = row_ok & (iw >= 0) & (iw < W)
            w = tl.load(w_ptr + c * KS * KS + kh * KS + kw)
            acc += w * tl.load(x_plane + ih * W + iw, mask=tap_ok, other=0.0).to(tl.float32)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + c)
    tl.store(out_ptr + plane * H_out * W_out + idx, acc, mask=ok)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, kernel_size: int, stride: int = 1, padding: int = 0, bias: bool = False):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, in_channels, kernel_size, stride=stride, padding=padding,
                                groups=in_channels, bias=bias)
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, C, H, W = x.shape
        k, s, p = self.kernel_size, self.stride, self.padding
        H_out = (H + 2 * p - k) // s + 1
        W_out = (W + 2 * p - k) // s + 1
        out = torch.empty((B, C, H_out, W_out), device=x.device, dtype=x.dtype)
        weight = self.conv2d.weight.contiguous()
        has_bias = self.conv2d.bias is not None
        bias = self.conv2d.bias if has_bias else weight
        grid = (B * C, triton.cdiv(H_out * W_out, 1024))
        depthwise_conv_kernel[grid](x, weight, bias, out, C, H, W, H_out, W_out, s, p, KS=k, HAS_BIAS=has_bias,
                                    BLOCK=1024)
        return out
