import torch
import torch.nn as nn


class Model(nn.Module):
    """Single-block attention: softmax(Q K^T / sqrt(d)) V over (batch, heads, seq, dim)."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) * q.shape[-1] ** -0.5
        return torch.matmul(torch.softmax(scores, dim=-1), v)


batch = 2
heads = 2
seq_len = 32
head_dim = 16


def get_inputs():
    shape = (batch, heads, seq_len, head_dim)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
