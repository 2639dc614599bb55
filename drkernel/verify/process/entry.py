"""Torch-free trampoline for evaluation children.

The caller's process never imports torch (the CLI would pay seconds for it); it names the child's
entry function by module and attribute, and the fork-server, which has them preloaded, resolves it.
"""

from __future__ import annotations

import importlib
from typing import Any


def run(module: str, function: str, *args: Any) -> None:
    getattr(importlib.import_module(module), function)(*args)
