"""Issue 35, CUDA timing attack (needs a gate bypass: run through Verifier._verify_ungated). The harness's own Runner
queues the forward's work on the GPU when the inputs arrive and answers "staged" without waiting for it; the timed
forward then copies the finished answer. The judge's cache flush and device sync before its clock wait behind the
queued work, so that wait is counted as the candidate's staging."""

import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl

READY = {}
Runner = sys.modules["drkernel.verify.harness.runner"].Runner


def _stage(self, sets, reuse):
    self.outputs, self.encoded = [], None
    if sets is not None:
        fresh = [self._materialise(s) for s in sets]
        if reuse:
            for old, new in zip(self.staged, fresh):
                for a, b in zip(old, new):
                    if isinstance(a, torch.Tensor):
                        a.copy_(b)
        else:
            self.staged = fresh
    with torch.no_grad():
        for a, b in self.staged:
            READY[a.data_ptr()] = torch.relu(a @ b)  # queued, not waited for
    self.reply({"type": "staged"})


Runner._stage = _stage


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        ready = READY.pop(a.data_ptr(), None)
        if ready is None:
            ready = torch.relu(a @ b)
        out = torch.empty_like(ready)
        copy_kernel[(triton.cdiv(out.numel(), 4096),)](ready, out, out.numel(), BLOCK=4096)
        return out
