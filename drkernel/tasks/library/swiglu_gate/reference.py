import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """SwiGLU gate: splits the last dimension in half and returns silu(first) * second."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return F.silu(gate) * up


batch_size = 64
hidden = 256


def get_inputs():
    return [torch.randn(batch_size, 2 * hidden)]


def get_init_inputs():
    return []
