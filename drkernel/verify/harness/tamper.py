"""Harness-tampering check: the callables the harness relies on must be the same objects after every
candidate call as before the candidate was imported (monkey-patching torch, timers or Triton's launch
machinery is how a candidate in the same process would fake a comparison or a time)."""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import torch

_TORCH_FUNCS = (
    "allclose",
    "isclose",
    "equal",
    "isnan",
    "isinf",
    "isfinite",
    "manual_seed",
    "randn",
    "rand",
    "randint",
    "empty",
    "empty_like",
    "zeros",
    "abs",
    "frombuffer",
)
_TENSOR_METHODS = (
    "clone",
    "detach",
    "cpu",
    "to",
    "contiguous",
    "data_ptr",
    "untyped_storage",
    "numel",
    "view",
    "reshape",
    "copy_",
    "double",
    "float",
    "abs",
    "max",
    "any",
    "all",
    "__eq__",
    "__ne__",
    "__sub__",
    "__and__",
    "__invert__",
    "is_floating_point",
    "__torch_function__",
)
_MISSING = object()
_TIME_FUNCS = ("perf_counter", "perf_counter_ns", "time", "monotonic")


def _guarded(extra: list[tuple[Any, str]]) -> list[tuple[Any, str]]:
    pairs: list[tuple[Any, str]] = [(torch, n) for n in _TORCH_FUNCS]
    pairs += [(torch.Tensor, n) for n in _TENSOR_METHODS]
    pairs += [(time, n) for n in _TIME_FUNCS]
    pairs += [(torch.nn.Module, "__call__"), (torch.nn.Module, "_call_impl"), (torch, "device")]
    pairs += [(torch.cuda, n) for n in ("synchronize", "Event", "current_stream", "is_available")]
    if hasattr(torch, "npu"):
        pairs += [(torch.npu, n) for n in ("synchronize", "Event", "current_stream") if hasattr(torch.npu, n)]
    pairs += [(torch.profiler, "profile")]
    interpreter = sys.modules.get("triton.runtime.interpreter")
    if interpreter is not None:  # the dot with the GPU's operand precision (drkernel.verify.harness.gpu_dot)
        pairs += [(interpreter.InterpreterBuilder, "create_dot")]
    return pairs + extra


def _raw(owner: Any, name: str) -> Any:
    """The stored object, not a freshly bound method (classmethods bind anew on every access)."""
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if name in klass.__dict__:
                return klass.__dict__[name]
        return None
    return getattr(owner, name, None)


def _namespaces() -> list[Any]:
    """Whole namespaces a reference draws on: replacing e.g. torch.relu would slow the reference
    timed in the candidate's process, or change what it computes."""
    spaces: list[Any] = [torch, torch.nn.functional, torch.Tensor, torch.linalg, torch.fft, torch.special, time, math]
    spaces += [cls for cls in vars(torch.nn).values() if isinstance(cls, type) and issubclass(cls, torch.nn.Module)]
    return spaces


class HarnessSnapshot:
    """Identity snapshot of harness callables, taken before the candidate is imported."""

    def __init__(self, extra: list[tuple[Any, str]] | None = None) -> None:
        self._pairs = _guarded(extra or [])
        self._values = [_raw(owner, name) for owner, name in self._pairs]
        self._modules = {name: sys.modules.get(name) for name in ("torch", "triton", "time")}
        self._spaces = [(ns, dict(vars(ns))) for ns in _namespaces()]

    def changed(self) -> list[str]:
        """Names of guarded callables that are no longer the original objects."""
        out = []
        for (owner, name), value in zip(self._pairs, self._values):
            if _raw(owner, name) is not value:
                owner_name = getattr(owner, "__name__", type(owner).__name__)
                out.append(f"{owner_name}.{name}")
        out += [f"sys.modules[{n!r}]" for n, m in self._modules.items() if sys.modules.get(n) is not m]
        for ns, before in self._spaces:
            now = vars(ns)
            # Additions are allowed (lazy submodule imports add names); replacements and deletions are not.
            out += [f"{getattr(ns, '__name__', '?')}.{k}" for k, v in before.items() if now.get(k, _MISSING) is not v]
        return out[:20]
