import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16
DIM = 512
NEGATIVE_SLOPE = 0.1


class Model(nn.Module):
    """Leaky ReLU with a constructor-given negative slope."""

    def __init__(self, negative_slope):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [NEGATIVE_SLOPE]
