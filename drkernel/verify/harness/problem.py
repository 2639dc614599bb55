"""The KernelBench contract, as both evaluation children use it: load, seed, construct, make inputs.

Both children derive everything from the same seeds, so the trusted child can regenerate exactly
the inputs the candidate saw without the two ever sharing a tensor they could tamper with.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from types import ModuleType
from typing import Any

from drkernel.verify.judging.backends import Backend

INIT_SEED = 42


def trial_seeds(count: int, salt: int = 0) -> list[int]:
    """Deterministic seeds; `salt` separates correctness (0), timing (1) and re-validation (2) sets."""
    rng = random.Random(INIT_SEED + 1_000_003 * salt)
    return [rng.randint(0, 2**32 - 1) for _ in range(count)]


def import_file(path: str, module_name: str) -> ModuleType:
    """Import a source file as a real module (compiled Triton refuses exec'd source)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def split_init_inputs(init: Any) -> tuple[list[Any], dict[str, Any]]:
    """KernelBench allows `[[], {kwargs}]` as init inputs; otherwise they are positional."""
    init = list(init) if isinstance(init, (list, tuple)) else [init]
    if len(init) == 2 and isinstance(init[0], (list, tuple)) and not init[0] and isinstance(init[1], dict):
        return [], dict(init[1])
    return init, {}


def init_inputs(module: ModuleType, backend: Backend) -> tuple[list[Any], dict[str, Any]]:
    backend.seed(INIT_SEED)
    with backend.torch.device(backend.device):
        return split_init_inputs(module.get_init_inputs())


def build_model(cls: type, args: list[Any], kwargs: dict[str, Any], backend: Backend) -> Any:
    """Construct with the KernelBench seed so reference and candidate get identical weights."""
    backend.seed(INIT_SEED)
    with backend.torch.device(backend.device):
        model = cls(*args, **kwargs)
    return model.to(backend.device) if hasattr(model, "to") else model


def make_inputs(module: ModuleType, seed: int, backend: Backend) -> list[Any]:
    """Inputs for one seed, created directly on the device (CPU-made big inputs cost seconds)."""
    torch = backend.torch
    backend.seed(seed)
    with torch.device(backend.device):
        values = list(module.get_inputs())
    return [v.to(backend.device) if isinstance(v, torch.Tensor) else v for v in values]
