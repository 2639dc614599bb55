"""Red-team (issue 38): torch does the ELU, a Triton launch copies one element nobody reads (a decoy that is not
flagged as one: every forward launches the candidate's own kernel). Under `timing: cpu_model` the coverage pass
in the candidate's process is gone; the modelled Triton share must still be about zero."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def touch_kernel(x_ptr, out_ptr):
    tl.store(out_ptr, tl.load(x_ptr))


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        scratch = torch.empty(1, dtype=x.dtype)
        touch_kernel[(1,)](x, scratch)
        return F.elu(x, alpha=self.alpha)
