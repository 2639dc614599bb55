"""Reference: a 3x3 fp32 convolution, 128 -> 128 channels on 4 x 32 x 32 (compute-bound on a GPU)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(128, 128, 3, padding=1, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(4, 128, 32, 32)]


def get_init_inputs():
    return []
