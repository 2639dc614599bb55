"""Red-team (issue 38): torch does the ELU; the forward counts its calls and, on the call right after the
correctness trials (the coverage pass when timing is off: one profiled call now, two before), spins in a
Triton kernel so that the pass reads as nearly all Triton time. Every other call launches one tiny kernel
(not a decoy by count)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

TRIALS = 2  # num_correct_trials the attacked verifier uses


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
        self.seen = [0]

    def forward(self, x):
        self.seen[0] += 1
        scratch = torch.empty(16, dtype=x.dtype)
        rounds = 4000 if TRIALS < self.seen[0] <= TRIALS + 2 else 1
        if rounds > 1:
            spin_kernel[(1,)](x, scratch, ROUNDS=4000, BLOCK=16)
        else:
            spin_kernel[(1,)](x, scratch, ROUNDS=1, BLOCK=16)
        return F.elu(x, alpha=self.alpha)
