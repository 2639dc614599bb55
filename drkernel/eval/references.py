"""The reference a candidate is timed against: the task's eager module, or the same module under torch.compile.

KernelBench reports speedups over both; a kernel that beats eager PyTorch may lose to the compiler. The compiled
variant is the task's own source with its entry point's constructor wrapped to `torch.compile` each instance's
forward, so weights, inputs and the constructor are the task's (the candidate's seeded weights still match). The
class itself is patched, not subclassed under its name: KernelBench's `super(Model, self).__init__()` looks the
name up at call time, and a subclass bound to it would make that call recurse forever. It needs a device and
toolchain that torch.compile supports (a CUDA GPU; on CPU a C++ compiler), and it cannot be priced by the CPU cost
model, which counts eager aten operators.
"""

from __future__ import annotations

from drkernel.config.eval import ReferenceMode

_COMPILED = '''

import torch as _drkernel_torch

_drkernel_eager_init = {entry}.__init__


def _drkernel_compiled_init(self, *args, **kwargs):
    """The task's constructor, then its forward compiled by torch.compile (drkernel eval --reference compile)."""
    _drkernel_eager_init(self, *args, **kwargs)
    self.forward = _drkernel_torch.compile(self.forward)


{entry}.__init__ = _drkernel_compiled_init
'''


def reference_source(source: str, entry_point: str, mode: ReferenceMode) -> str:
    """The reference code sent to the verifier in `mode`."""
    if mode == "eager":
        return source
    if mode == "compile":
        if not entry_point.isidentifier():
            raise ValueError(f"entry point {entry_point!r} is not a Python name")
        return source.rstrip("\n") + "\n" + _COMPILED.format(entry=entry_point)
    raise ValueError(f"unknown reference mode {mode!r}; choose eager or compile")
