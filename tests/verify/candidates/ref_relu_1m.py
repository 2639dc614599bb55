"""Reference: relu over 1M float32 elements."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(1 << 20)]


def get_init_inputs():
    return []
