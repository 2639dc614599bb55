"""Issue 35, red team F2 (needs a gate bypass: run through Verifier._verify_ungated). A thread of this process keeps
running between the judge's orders (the red team's spun torch.mm to slow the reference's timed calls). Here it only
watches its own clock: while the candidate's process is stopped during each timed turn of the reference (the reference
waits 250 ms a call), the thread sees a gap of at least 200 ms. The two re-validation calls (calls 6 and 7 with one
correctness trial, one warm-up and three timed rounds of one call) return a wrong answer if it never saw one, so the
verdict is correct only if the process was stopped while the reference was timed."""

import threading
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

LONGEST = [0.0]


def _watch():
    last = time.monotonic()
    while True:
        time.sleep(0.002)
        now = time.monotonic()
        LONGEST[0] = max(LONGEST[0], now - last)
        last = now


threading.Thread(target=_watch, daemon=True).start()


@triton.jit
def touch_kernel(c):
    tl.store(c, tl.load(c))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, a, b):
        self.calls += 1
        c = torch.matmul(a, b)
        if self.calls >= 6 and LONGEST[0] < 0.2:
            c = c + 1.0
        touch_kernel[(1,)](c)
        return c
