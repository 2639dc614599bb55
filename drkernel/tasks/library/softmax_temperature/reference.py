import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax of logits divided by a sampling temperature."""

    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = temperature

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits / self.temperature, dim=-1)


batch_size = 16
vocab = 512
temperature = 0.7


def get_inputs():
    return [torch.randn(batch_size, vocab) * 2.0]


def get_init_inputs():
    return [temperature]
