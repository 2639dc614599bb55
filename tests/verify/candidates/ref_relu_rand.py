"""Reference: relu on torch.rand inputs (all >= 0), as KernelBench 19_ReLU: returning the input is value-correct."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.rand(32, 128)]


def get_init_inputs():
    return []
