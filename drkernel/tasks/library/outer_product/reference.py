import torch
import torch.nn as nn


class Model(nn.Module):
    """Outer product of two vectors."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.outer(a, b)


len_a = 128
len_b = 96


def get_inputs():
    return [torch.randn(len_a), torch.randn(len_b)]


def get_init_inputs():
    return []
