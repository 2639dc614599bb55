"""Reference for the issue-27 attacks: a 512^3 fp32 matmul (eager PyTorch: exact fp32, TF32 off)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(512, 512), torch.randn(512, 512)]


def get_init_inputs():
    return []
