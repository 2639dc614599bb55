import time

import torch
import torch.nn as nn


class Model(nn.Module):
    """A small matmul after 2 ms of waiting: over the judge's 1 ms round target, so every timed round is one call."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        time.sleep(0.002)
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(64, 256), torch.randn(256, 64)]


def get_init_inputs():
    return []
