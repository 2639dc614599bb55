import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Per-row softmax cross-entropy between logits and integer class targets (no reduction)."""

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets, reduction="none")


batch_size = 32
num_classes = 200


def get_inputs():
    return [torch.randn(batch_size, num_classes) * 2.0, torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
