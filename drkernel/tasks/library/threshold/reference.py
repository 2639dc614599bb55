import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16
DIM = 512
THRESHOLD = 0.25
VALUE = -1.0


class Model(nn.Module):
    """Keeps x where x > threshold, otherwise writes value."""

    def __init__(self, threshold, value):
        super().__init__()
        self.threshold = threshold
        self.value = value

    def forward(self, x):
        return F.threshold(x, self.threshold, self.value)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [THRESHOLD, VALUE]
