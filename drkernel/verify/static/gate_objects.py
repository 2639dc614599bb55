"""The allowed modules as loaded objects, so the gate decides on what a path reaches, not on how it is spelt.

Allowed modules re-export whole stdlib modules and loaders (`torch.builtins.exec`, `typing.sys.modules`,
`torch.ops.import_module`), and a submodule of torch is a module whatever its last name: so every dotted
path rooted at an imported module is walked over the real objects, read with inspect.getattr_static (no
module `__getattr__`, descriptor or property of a library runs for a candidate's path). A module it
reaches must be allowed, a function or class must not be a denied API, a code-running builtin, or come from
a module off the allow-list; and `kind` tells the gate what the path holds, to decide where it may travel.
Built once per process, on first use (importing torch takes seconds).
"""

from __future__ import annotations

import builtins
import functools
import importlib
import importlib.util
import inspect
import sys
import threading
import types
from typing import Any

from drkernel.verify.static.gate_policy import (
    ALLOWED_MODULES,
    ALLOWED_REEXPORTS,
    CALLABLE_HOMES,
    DANGEROUS_BUILTINS,
    DENIED_ATTR_PATTERN,
    DENIED_ATTRS,
    DENIED_PATHS,
    OPEN_UNDER_DENIED,
    TRAVERSABLE_MODULES,
)

MISSING = object()  # what `get` returns for a path the static walk cannot follow


def path_problem(path: str) -> str | None:
    """The name rules for a dotted path: private and denied names, denied paths."""
    for part in path.split(".")[1:]:
        if part.startswith("_"):
            return f"private or dunder name {path}"
        if part in DENIED_ATTRS or DENIED_ATTR_PATTERN.match(part):
            return f"forbidden API {path}"
    if path.startswith(OPEN_UNDER_DENIED):
        return None
    for denied in DENIED_PATHS:
        if path == denied or path.startswith(denied + "."):
            return f"forbidden API {path}"
    return None


def module_problem(name: str, here: str) -> str | None:
    if name in TRAVERSABLE_MODULES:
        return None
    return f"{here} is the module {name} (not on the allow-list)"


def home_allowed(home: str) -> bool:
    """A function's or class's defining module is on CALLABLE_HOMES (exactly, or under an entry ending in ".")."""
    return home in CALLABLE_HOMES or any(h.endswith(".") and home.startswith(h) for h in CALLABLE_HOMES)


def _unwrap(obj: Any) -> Any:
    return obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj


class RealObjects:
    """Static attribute walks over the allowed modules, memoised (kernels repeat paths)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roots: dict[str, Any] | None = None
        self._denied: dict[int, str] = {}
        self._keep: list[Any] = []  # holds the denied objects, so their ids stay theirs
        self._seen: dict[str, str | None] = {}
        self._data: tuple[type, ...] = ()
        self._callables: tuple[type, ...] = ()
        self._module_class: type | None = None
        self._kernel_class: type | None = None

    def _load(self) -> dict[str, Any]:
        with self._lock:
            if self._roots is None:
                for name in sorted(ALLOWED_MODULES - {"__future__"}):
                    try:
                        importlib.import_module(name)
                    except Exception:  # e.g. torch.npu without torch_npu: names judge it
                        continue
                roots = {n.partition(".")[0] for n in ALLOWED_MODULES - {"__future__"}}
                found = {n: sys.modules[n] for n in roots if n in sys.modules}
                for name in DANGEROUS_BUILTINS:
                    self._deny(builtins.__dict__.get(name), f"builtin {name}")
                for path in DENIED_PATHS:
                    self._deny(self._static(found, path), f"forbidden API {path}")
                self._kinds()
                self._roots = found
            return self._roots

    def _kinds(self) -> None:
        import torch
        import triton
        import triton.language as tl

        self._data = (int, float, complex, bool, str, bytes, type(None))
        self._data += (torch.dtype, torch.layout, torch.memory_format, torch.device, tl.dtype, tl.constexpr)
        self._callables = (
            types.FunctionType,
            types.BuiltinFunctionType,
            types.MethodDescriptorType,
            types.WrapperDescriptorType,
            types.ClassMethodDescriptorType,
            types.MethodWrapperType,
            functools.partial,
            triton.runtime.jit.KernelInterface,
            torch._ops.OpOverloadPacket,
            torch._ops.OpOverload,
        )
        self._module_class = torch.nn.Module
        self._kernel_class = triton.runtime.jit.KernelInterface

    def _deny(self, obj: Any, what: str) -> None:
        if obj is not None and not isinstance(obj, types.ModuleType) and (callable(obj) or isinstance(obj, type)):
            self._keep.append(obj)
            self._denied.setdefault(id(obj), what)

    @staticmethod
    def _static(roots: dict[str, Any], path: str) -> Any:
        head, *rest = path.split(".")
        obj = roots.get(head)
        try:
            for part in rest:
                obj = _unwrap(inspect.getattr_static(obj, part))
        except Exception:  # not there in this install
            return None
        return obj

    def get(self, path: str) -> Any:
        """The object `path` names, or MISSING where the static walk cannot reach it."""
        roots = self._load()
        head, *rest = path.split(".")
        obj = roots.get(head, MISSING)
        if obj is MISSING:
            return MISSING
        for part in rest:
            try:
                obj = _unwrap(inspect.getattr_static(obj, part))
            except Exception:
                try:  # a submodule imported here but not bound on its package
                    obj = sys.modules[f"{obj.__name__}.{part}"] if isinstance(obj, types.ModuleType) else MISSING
                except KeyError:
                    return MISSING
                if obj is MISSING:
                    return MISSING
        return obj

    def kind(self, path: str) -> str:
        """module, class, callable, data, object (any other instance) or missing."""
        obj = self.get(path)
        if obj is MISSING:
            return "missing"
        if isinstance(obj, types.ModuleType):
            return "module"
        if isinstance(obj, type):
            return "class"
        if isinstance(obj, self._data) and not isinstance(obj, type):
            return "data"
        if isinstance(obj, self._callables):
            return "callable"
        return "object"

    def home(self, path: str) -> str | None:
        """The module an object was defined in; for a Triton kernel object (JITFunction, or the interpreter's
        InterpretedFunction, whose class lives in triton.runtime) the module of the function it wraps."""
        obj = self.get(path)
        for _ in range(4):
            if not isinstance(obj, self._kernel_class):
                break
            obj = obj.__dict__.get("fn", MISSING)
        try:
            home = obj.__module__
        except Exception:  # no home to judge
            return None
        return home if isinstance(home, str) else None

    def is_class(self, path: str) -> bool:
        return isinstance(self.get(path), type)

    def is_tensor_class(self, path: str) -> bool:
        """torch.Tensor or a subclass of it (nn.Parameter, nn.Buffer)."""
        import torch

        obj = self.get(path)
        return isinstance(obj, type) and issubclass(obj, torch.Tensor)

    def is_builtin_value_class(self, path: str) -> bool:
        """A subclass of tuple, list, dict, set, int, float, str or bytes (typing.NamedTuple's too)."""
        obj = self.get(path)
        if obj is not MISSING and getattr(obj, "__name__", None) == "NamedTuple":  # typing.NamedTuple is a function
            return True
        values = (tuple, list, dict, set, frozenset, int, float, complex, str, bytes)
        return isinstance(obj, type) and issubclass(obj, values)

    def is_module_class(self, path: str) -> bool:
        """A strict subclass of nn.Module (`norm_layer=nn.LayerNorm` travels like a function)."""
        obj = self.get(path)
        self._load()
        return isinstance(obj, type) and obj is not self._module_class and issubclass(obj, self._module_class)

    def reach(self, path: str) -> str | None:
        """What is wrong with the first thing `path` reaches, if anything."""
        if path not in self._seen:
            if len(self._seen) > 100_000:
                self._seen.clear()
            self._seen[path] = self._walk(path)
        return self._seen[path]

    def _walk(self, path: str) -> str | None:
        roots = self._load()
        head, *rest = path.split(".")
        obj = roots.get(head)
        if obj is None:
            return None
        real = head
        for i, part in enumerate(rest, 2):
            here = ".".join(path.split(".")[:i])
            try:
                obj = _unwrap(inspect.getattr_static(obj, part))
            except Exception:  # absent, or only a hook (a module __getattr__, a lazy import) could produce it
                found = self._unseen(obj, part, here)
                if isinstance(found, str) or found is None:
                    return found
                obj = found
            real = obj.__name__ if isinstance(obj, types.ModuleType) else f"{real}.{part}"
            problem = self._object_problem(obj, here)
            if problem:
                return problem
        return path_problem(real) if real != path else None

    def _unseen(self, obj: Any, part: str, here: str) -> Any:
        """An attribute the static walk cannot see: an allowed submodule not imported here yet is imported (it
        is library code) and the walk goes on; an op of torch.ops' lazy namespaces is judged by its name (None);
        anything else is refused, since whatever would produce it at run time is unknown here (red team F2)."""
        if isinstance(obj, types.ModuleType) and isinstance(obj.__name__, str):
            name = f"{obj.__name__}.{part}"
            if name in TRAVERSABLE_MODULES:
                try:
                    return importlib.import_module(name)
                except Exception as e:
                    return f"{here}: the module {name} does not import here ({type(e).__name__})"
            if obj.__name__ in ("torch.ops", "torch.ops.aten"):
                return None
            try:
                spec = importlib.util.find_spec(name)
            except Exception:  # not a package
                spec = None
            if spec is not None:
                return module_problem(name, here)
        return f"{here} cannot be found without running code (a lazy or missing attribute)"

    def _object_problem(self, obj: Any, here: str) -> str | None:
        if isinstance(obj, types.ModuleType):
            name = obj.__name__ if isinstance(obj.__name__, str) else "?"
            problem = module_problem(name, here)
            if problem is None and not any(o.startswith(name + ".") for o in OPEN_UNDER_DENIED):
                problem = path_problem(name)
            return problem
        denied = self._denied.get(id(obj))
        if denied is not None:
            return f"{here} is {denied}"
        if callable(obj) or isinstance(obj, type):
            try:
                home = obj.__module__
            except Exception:  # no home to judge
                return None
            if isinstance(home, str) and not home_allowed(home) and here not in ALLOWED_REEXPORTS:
                return f"{here} is defined in {home} (not on the allow-list)"
            if (
                isinstance(home, str)
                and home.startswith("torch.")
                and not home.startswith(OPEN_UNDER_DENIED)
                and here not in ALLOWED_REEXPORTS
            ):
                # re-exports of denied torch modules (`torch.cuda.caching_allocator_alloc` from torch.cuda.memory);
                # Triton's public API (triton.jit, triton.autotune) lives in its runtime, which is no such case
                problem = path_problem(home)
                if problem and not problem.startswith("private"):
                    return f"{here} is defined in {home}: {problem}"
        return None


REAL = RealObjects()
