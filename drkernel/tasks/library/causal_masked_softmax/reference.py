import torch
import torch.nn as nn


class Model(nn.Module):
    """Scaled, causally masked softmax over attention scores (batch, query, key)."""

    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = head_dim ** -0.5

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        seq = scores.shape[-1]
        future = torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=scores.device), diagonal=1)
        return torch.softmax((scores * self.scale).masked_fill(future, float("-inf")), dim=-1)


batch = 4
seq_len = 32
head_dim = 16


def get_inputs():
    return [torch.randn(batch, seq_len, seq_len) * 4.0]


def get_init_inputs():
    return [head_dim]
