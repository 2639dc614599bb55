import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16
DIM = 512
MIN_VAL = -0.5
MAX_VAL = 0.5


class Model(nn.Module):
    """Clamps every element into [min_val, max_val]."""

    def __init__(self, min_val, max_val):
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x):
        return F.hardtanh(x, min_val=self.min_val, max_val=self.max_val)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [MIN_VAL, MAX_VAL]
