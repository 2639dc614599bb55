import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def groupnorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, group_size, plane, channels_per_group, num_groups, eps,
                     BLOCK: tl.constexpr):
    # One (sample, group) per program; a group's channels are contiguous in NCHW.
    pid = tl.program_id(0)
    group = pid % num_groups
    offs = tl.arange(0, BLOCK)
    mask = offs < group_size
    base = pid * group_size
    x = tl.load(x_ptr + base + offs, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / group_size
    centered = tl.where(mask, x - mean, 0.0)
    rstd = tl.rsqrt(tl.sum(centered * centered, axis=0) / group_size + eps)
    ch = group * channels_per_group + offs // plane
    w = tl.load(w_ptr + ch, mask=mask, other=0.0)
    b = tl.load(b_ptr + ch, mask=mask, other=0.0)
    tl.store(out_ptr + base + offs, centered * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_groups: int, channels: int, eps: float):
        super().__init__()
        self.num_groups = num_groups
        self.weight = nn.Parameter(1.0 + 0.2 * torch.randn(channels))
        self.bias = nn.Parameter(0.2 * torch.randn(channels))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n, c, h, w = x.shape
        cpg = c // self.num_groups
        group_size = cpg * h * w
        out = torch.empty_like(x)
        groupnorm_kernel[(n * self.num_groups,)](
            x, self.weight, self.bias, out, group_size, h * w, cpg, self.num_groups, self.eps,
            BLOCK=triton.next_power_of_2(group_size))
        return out
