"""Reference: x * scale on 3000 float32 elements (odd size: masking matters); scale is an init input."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale


def get_inputs():
    return [torch.randn(3000)]


def get_init_inputs():
    return [2.5]
