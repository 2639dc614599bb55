import torch
import torch.nn as nn


class Model(nn.Module):
    """A @ B^T, with both operands stored row-major."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b.T)


m = 64
n = 48
k = 80


def get_inputs():
    return [torch.randn(m, k), torch.randn(n, k)]


def get_init_inputs():
    return []
