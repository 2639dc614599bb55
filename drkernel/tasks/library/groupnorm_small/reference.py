import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Group normalization of an NCHW tensor with a learned per-channel weight and bias."""

    def __init__(self, num_groups: int, channels: int, eps: float):
        super().__init__()
        self.num_groups = num_groups
        self.weight = nn.Parameter(1.0 + 0.2 * torch.randn(channels))
        self.bias = nn.Parameter(0.2 * torch.randn(channels))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


batch_size = 8
channels = 32
num_groups = 4
height = 4
width = 4
eps = 1e-5


def get_inputs():
    return [torch.randn(batch_size, channels, height, width) * 1.5 + 0.3]


def get_init_inputs():
    return [num_groups, channels, eps]
