import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matrix product of two 3-D tensors."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


batch = 4
m = 32
k = 48
n = 32


def get_inputs():
    return [torch.randn(batch, m, k), torch.randn(batch, k, n)]


def get_init_inputs():
    return []
