"""Issue 35, timing attack (needs a gate bypass: tests run it through Verifier._verify_ungated). The harness's own
Runner is rewritten in this process so that "stage" does the forward's real work (and waits 200 ms, standing in for
more work) when the inputs arrive, before the judge's clock starts; the timed forward then only copies the stored
answer with a one-program Triton kernel. The judge that timed only "run" saw a speedup of several times and a
coverage near 1.0."""

import sys
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

READY = {}
Runner = sys.modules["drkernel.verify.harness.runner"].Runner
_original_stage = Runner._stage


def _stage(self, sets, reuse):
    reply = self.reply
    self.reply = lambda header, payload=None: None  # the original's reply waits until the work is done
    try:
        _original_stage(self, sets, reuse)
    finally:
        self.reply = reply
    with torch.no_grad():
        for x, w in self.staged:
            READY[x.data_ptr()] = torch.relu(x @ w).sum(dim=1)
    time.sleep(0.2)
    self.reply({"type": "staged"})


Runner._stage = _stage


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, w):
        ready = READY.get(x.data_ptr())
        if ready is None:
            ready = torch.relu(x @ w).sum(dim=1)
        out = torch.empty_like(ready)
        copy_kernel[(1,)](ready, out, ready.numel(), BLOCK=triton.next_power_of_2(ready.numel()))
        return out
