import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def batchnorm_infer_kernel(x_ptr, mean_ptr, var_ptr, w_ptr, b_ptr, out_ptr, n, channels, plane, eps,
                           BLOCK: tl.constexpr):
    # Flat pass over NCHW; every element derives its channel and applies scale/shift directly.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    ch = (offs // plane) % channels
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    mean = tl.load(mean_ptr + ch, mask=mask, other=0.0)
    var = tl.load(var_ptr + ch, mask=mask, other=1.0)
    w = tl.load(w_ptr + ch, mask=mask, other=0.0)
    b = tl.load(b_ptr + ch, mask=mask, other=0.0)
    scale = w * tl.rsqrt(var + eps)
    tl.store(out_ptr + offs, (x - mean) * scale + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, channels: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.2 * torch.randn(channels))
        self.bias = nn.Parameter(0.2 * torch.randn(channels))
        self.register_buffer("running_mean", 0.5 * torch.randn(channels))
        self.register_buffer("running_var", 0.5 + torch.rand(channels))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        block = 1024
        batchnorm_infer_kernel[(triton.cdiv(n, block),)](
            x, self.running_mean, self.running_var, self.weight, self.bias, out,
            n, x.shape[1], x.shape[2] * x.shape[3], self.eps, BLOCK=block)
        return out
