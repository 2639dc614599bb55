"""Reference: elementwise product of two 4096-element vectors."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a * b


def get_inputs():
    return [torch.randn(4096), torch.randn(4096)]


def get_init_inputs():
    return []
