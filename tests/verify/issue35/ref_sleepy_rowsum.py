import time

import torch
import torch.nn as nn


class Model(nn.Module):
    """relu(x @ w) summed over each row, after 300 ms of waiting: a forward of known, load-independent length."""

    def __init__(self):
        super().__init__()

    def forward(self, x, w):
        time.sleep(0.3)
        return torch.relu(x @ w).sum(dim=1)


def get_inputs():
    return [torch.randn(64, 64), torch.randn(64, 64)]


def get_init_inputs():
    return []
