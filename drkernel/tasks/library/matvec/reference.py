import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix-vector product A @ v."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.mv(a, v)


rows = 128
cols = 512


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(cols)]


def get_init_inputs():
    return []
