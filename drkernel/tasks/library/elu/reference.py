import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16
DIM = 512
ALPHA = 1.0


class Model(nn.Module):
    """Exponential linear unit."""

    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return F.elu(x, alpha=self.alpha)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [ALPHA]
