"""Issue 35, red team F4 (needs a gate bypass: run through Verifier._verify_ungated). The harness's coverage order is
rewritten in this process: the pass runs the forward on the staged sets (its outputs are compared as usual) and
claims 10 s of kernel time per call, all of it Triton; the evidence claims 10 s in launches during the other calls.
Claims above the judge's timing were clipped to the judge's figures, so the coverage read 1.0; the forward is eager
work plus a one-element Triton touch."""

import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl

Runner = sys.modules["drkernel.verify.harness.runner"].Runner
Observer = sys.modules["drkernel.verify.harness.runner"].Observer
_evidence = Observer.evidence


FORGED = [0.0]


def _forged_evidence(self):  # cumulative, as the judge reads it: 10 s more after every collect
    FORGED[0] += 1e4
    return {**_evidence(self), "kernel_s": FORGED[0]}


def _coverage(self, k):
    with torch.no_grad():
        self.outputs = [self.model(*inputs) for inputs in self.staged[:k]]
    self.encoded = None
    self.reply(
        {
            "type": "coverage",
            "kernel_ms_per_call": 1e4,
            "fraction": 1.0,
            "source": "cpu_wall_net",
            "detail": {"forward_ms_per_call": 1e4},
            "collisions": [],
        }
    )


Runner._coverage = _coverage
Observer.evidence = _forged_evidence


@triton.jit
def touch_kernel(c):
    tl.store(c, tl.load(c))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, w):
        out = torch.relu(x @ w).sum(dim=1)
        touch_kernel[(1,)](out)
        return out
