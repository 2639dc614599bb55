import torch
import torch.nn as nn


class Model(nn.Module):
    """The class of each row: argmax of logits in which every class appears twice (columns j and j + 32 equal)."""

    def __init__(self):
        super().__init__()
        w = torch.randn(64, 32)
        self.register_buffer("w", torch.cat([w, w], dim=1))

    def forward(self, x):
        return torch.argmax(x @ self.w, dim=1)


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
