import torch
import torch.nn as nn

BATCH = 16
DIM = 512
ALPHA = 1.75
BETA = -0.5


class Model(nn.Module):
    """Computes alpha * x + beta for scalar alpha and beta."""

    def __init__(self, alpha, beta):
        super().__init__()
        self.alpha = alpha
        self.beta = beta

    def forward(self, x):
        return x * self.alpha + self.beta


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [ALPHA, BETA]
