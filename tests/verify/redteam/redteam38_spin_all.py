"""Red-team (issue 38): torch does the ELU; every forward also spins in a Triton kernel on 16 elements. Under
`timing: measured` on CPU, coverage is interpreter wall time inside the candidate's launches, so the spin reads
as Triton work in the profiled call and in the timed calls alike (no call told apart)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def spin_kernel(x_ptr, out_ptr, ROUNDS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.load(x_ptr + offs)
    for _ in range(ROUNDS):
        acc = acc * 0.5 + 0.25
    tl.store(out_ptr + offs, acc)


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        scratch = torch.empty(16, dtype=x.dtype)
        spin_kernel[(1,)](x, scratch, ROUNDS=4000, BLOCK=16)
        return F.elu(x, alpha=self.alpha)
