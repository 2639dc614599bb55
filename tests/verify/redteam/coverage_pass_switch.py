"""Red team: the coverage pass is told apart from the checked/timed calls and nothing it returns is checked.

All the work is torch.matmul; a one-element Triton kernel launches once per call (the decoy check only asks
for a launch). The CPU coverage pass calls forward twice in a row on the very same input tensors (no other
timed or checked call does, except the same-storage re-validation, where the extra launches are harmless),
so when the input storage equals the previous call's, the model relaunches its kernel many times: the
measured coverage climbs from ~0.2 (what the timed calls really spend in Triton) to ~1.0."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_kernel(c_ptr):
    tl.store(c_ptr, tl.load(c_ptr))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.last = -1

    def forward(self, a, b):
        c = torch.matmul(a, b)
        watched = a.data_ptr() == self.last
        self.last = a.data_ptr()
        for _ in range(200 if watched else 1):
            touch_kernel[(1,)](c)
        return c
