"""Red-team (issue 38): torch does the ELU in every forward. The forwards the judge compares also launch a
one-element Triton copy (so none is a decoy by the per-forward launch check); the forward the CPU model traces
(the call right after the correctness trials: counted here) launches nothing, so the replay prices plain torch,
the reference's own work: modelled speedup 1.0 with no Triton at all."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

TRIALS = 2  # num_correct_trials of the attacked verifier (configs/demo_cpu.yaml)


@triton.jit
def touch_kernel(x_ptr, out_ptr):
    tl.store(out_ptr, tl.load(x_ptr))


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha
        self.seen = [0]

    def forward(self, x):
        self.seen[0] += 1
        if self.seen[0] != TRIALS + 1:
            scratch = torch.empty(1, dtype=x.dtype)
            touch_kernel[(1,)](x, scratch)
        return F.elu(x, alpha=self.alpha)
