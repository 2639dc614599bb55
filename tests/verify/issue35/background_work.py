"""Issue 35, timing attack (needs a gate bypass: tests run it through Verifier._verify_ungated). The harness's own
Runner answers "staged" at once and does the forward's work (300 ms of it, as long as the reference's) in a
background thread; the timed forward waits for that thread. While both runners were staged before either ran, the
work overlapped the reference's run whenever the reference went first, and the median run was near zero."""

import sys
import threading
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

READY = {}
Runner = sys.modules["drkernel.verify.harness.runner"].Runner
_original_stage = Runner._stage


def _work(pairs):
    for x, w in pairs:
        time.sleep(0.3)
        READY[x.data_ptr()] = torch.relu(x @ w).sum(dim=1)


def _stage(self, sets, reuse):
    _original_stage(self, sets, reuse)  # replies "staged" at its end
    threading.Thread(target=_work, args=([(x, w) for x, w in self.staged],), daemon=True).start()


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
        for _ in range(1000):  # wait for the background work (at most 10 s)
            ready = READY.pop(x.data_ptr(), None)
            if ready is not None:
                break
            time.sleep(0.01)
        else:
            ready = torch.relu(x @ w).sum(dim=1)
        out = torch.empty_like(ready)
        copy_kernel[(1,)](ready, out, ready.numel(), BLOCK=triton.next_power_of_2(ready.numel()))
        return out
