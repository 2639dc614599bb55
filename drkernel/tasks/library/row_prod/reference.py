import torch
import torch.nn as nn

ROWS = 32
COLS = 64


class Model(nn.Module):
    """Multiplies the entries of each row."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.prod(x, dim=1)


def get_inputs():
    # values in [0.9, 1.1) keep the products well inside fp32 range
    return [0.9 + 0.2 * torch.rand(ROWS, COLS)]


def get_init_inputs():
    return []
