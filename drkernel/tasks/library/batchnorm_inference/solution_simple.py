import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def plane_affine_kernel(x_ptr, scale_ptr, shift_ptr, out_ptr, channels, plane, BLOCK: tl.constexpr):
    # One (sample, channel) plane per program.
    pid = tl.program_id(0)
    ch = pid % channels
    offs = tl.arange(0, BLOCK)
    mask = offs < plane
    x = tl.load(x_ptr + pid * plane + offs, mask=mask, other=0.0)
    scale = tl.load(scale_ptr + ch)
    shift = tl.load(shift_ptr + ch)
    tl.store(out_ptr + pid * plane + offs, x * scale + shift, mask=mask)


class ModelNew(nn.Module):
    """Per-channel scale and shift folded in torch, applied plane by plane in Triton."""

    def __init__(self, channels: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.2 * torch.randn(channels))
        self.bias = nn.Parameter(0.2 * torch.randn(channels))
        self.register_buffer("running_mean", 0.5 * torch.randn(channels))
        self.register_buffer("running_var", 0.5 + torch.rand(channels))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        scale = (self.weight * torch.rsqrt(self.running_var + self.eps)).detach().contiguous()
        shift = (self.bias - self.running_mean * scale).detach().contiguous()
        out = torch.empty_like(x)
        n, c, h, w = x.shape
        plane_affine_kernel[(n * c,)](x, scale, shift, out, c, h * w, BLOCK=triton.next_power_of_2(h * w))
        return out
