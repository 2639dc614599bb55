"""Reference for the issue-27 attacks: a 64x1024 @ 1024x64 fp32 matmul: long enough sums that TF32
operands miss the 1e-2 tolerance on every seed (20 of 20 checked), small enough for the interpreter."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(64, 1024), torch.randn(1024, 64)]


def get_init_inputs():
    return []
