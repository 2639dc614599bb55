"""KernelBench-format reference: element-wise sum of two vectors."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


N = 4096  # small: the CPU Triton interpreter costs about 1 ms per program instance


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return []
