"""Reference for cpu_model_ballast.py: a forward with a 768 MB temporary (a broadcast made contiguous, then reduced)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        t = x.unsqueeze(0).expand(192, -1).contiguous()
        return t.sum(0) / 192


def get_inputs():
    return [torch.randn(1 << 20)]


def get_init_inputs():
    return []
