import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def group_stats_kernel(x_ptr, mean_ptr, rstd_ptr, group_size, eps, BLOCK: tl.constexpr):
    # Two passes over the group in small chunks: first the mean, then the variance.
    pid = tl.program_id(0)
    base = pid * group_size
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, group_size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + base + offs, mask=offs < group_size, other=0.0)
    mean = tl.sum(acc, axis=0) / group_size
    acc2 = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, group_size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < group_size
        d = tl.where(mask, tl.load(x_ptr + base + offs, mask=mask, other=0.0) - mean, 0.0)
        acc2 += d * d
    tl.store(mean_ptr + pid, mean)
    tl.store(rstd_ptr + pid, tl.rsqrt(tl.sum(acc2, axis=0) / group_size + eps))


class ModelNew(nn.Module):
    """Group statistics in Triton; normalization and the affine map in torch."""

    def __init__(self, num_groups: int, channels: int, eps: float):
        super().__init__()
        self.num_groups = num_groups
        self.weight = nn.Parameter(1.0 + 0.2 * torch.randn(channels))
        self.bias = nn.Parameter(0.2 * torch.randn(channels))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n, c, h, w = x.shape
        g = self.num_groups
        mean = torch.empty(n * g, device=x.device, dtype=x.dtype)
        rstd = torch.empty(n * g, device=x.device, dtype=x.dtype)
        group_stats_kernel[(n * g,)](x, mean, rstd, (c // g) * h * w, self.eps, BLOCK=32)
        grouped = x.view(n, g, -1)
        normed = ((grouped - mean.view(n, g, 1)) * rstd.view(n, g, 1)).view(n, c, h, w)
        return normed * self.weight.view(1, c, 1, 1) + self.bias.view(1, c, 1, 1)
