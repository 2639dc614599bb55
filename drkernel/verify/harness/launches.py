"""Launch evidence: which of the candidate's own Triton kernels ran, on which stream, for how long.

Two sources, because neither sees everything:
- `triton.knobs.runtime.launch_enter_hook` (a HookChain with add/remove in Triton 3.6-3.9) sees every
  compiled launch with its kernel name and stream, but never fires under TRITON_INTERPRET=1.
- A wrapper around `run` of the JIT function classes (JITFunction, and InterpretedFunction in the
  interpreter) sees launches in both modes and knows the source file of the kernel, which is how a
  launch is attributed to the candidate rather than to a library (exact file, not a name match).
Under the interpreter the time of the launch's programs (not the launcher around them, which copies
arguments and calls the grid function and pre-run hooks), less the time kernel bodies spend in calls to
anything but Triton, the candidate file's other code included (torch, plain Python helpers: `track_foreign`),
is the kernel's execution time (CPU coverage). A kernel body is known by its code's file, name and the lines
its jit function spans, not by name alone. A launch counts as the candidate's only when the JIT object
that ran was defined in the candidate's file: the launch hook's names merely annotate the wrapper's
launch with its stream, so a kernel named like a library kernel gains nothing (issue 8, seen #10).

Every launch in the candidate's process is checked before it runs (issue 34, red-team F3/F6/F7): its arguments
must be exactly tensors or plain scalars (a tensor in a list or as a tl.constexpr, or a host object shaped like a
tensor, runs Python inside the launch), and under the interpreter, where a pointer is a raw host address, every
load, store and atomic must fall inside the storages of that launch's tensor arguments (`TritonCounter` in
checking-only mode), so a kernel cannot read or write the process's own objects.
"""

from __future__ import annotations

import inspect
import os
import sys
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

from drkernel.perfmodel.triton_count import TritonCounter
from drkernel.verify.harness.ascend_grid import check_programs, launch_grid

SCALAR_ARGS = (bool, int, float, str, type(None))  # with torch.dtype: the replay's CONSTEXPR_VALUES
TENSOR_ARGS = (torch.Tensor, torch.nn.Parameter)
LAUNCHER_KWARGS = frozenset({"grid", "warmup"})


class BadLaunch(RuntimeError):
    """A launch whose arguments a kernel must not get; the evaluation is a candidate error."""


def _descriptor_type() -> type | None:
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor
    except ImportError:
        return None
    return TensorDescriptor


def _parameters(jit_obj: Any) -> tuple[list[str], set[str]]:
    """The kernel's parameter names in order, and those annotated tl.constexpr (also as a postponed string)."""
    import triton.language as tl

    fn = getattr(jit_obj, "fn", None)
    try:
        names = list(inspect.signature(fn).parameters)
        notes = inspect.get_annotations(fn)
    except (TypeError, ValueError):
        return [], set()
    constexprs = {n for n, a in notes.items() if a is tl.constexpr or (isinstance(a, str) and a.endswith("constexpr"))}
    return names, constexprs


def launch_spans(jit_obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[int, int]]:
    """The byte spans [start, end) of the launch's tensor arguments' storages; BadLaunch for any argument that is
    not exactly a tensor, a tensor descriptor over one, a plain scalar or a torch dtype, or a tensor handed to a
    tl.constexpr (the interpreter would run the body's operators on it as torch)."""
    descriptor = _descriptor_type()
    spans: list[tuple[int, int]] = []
    params, constexprs = _parameters(jit_obj)
    named = [(params[i] if i < len(params) else str(i), a) for i, a in enumerate(args)]
    named += [(k, v) for k, v in kwargs.items() if k not in LAUNCHER_KWARGS]
    for name, value in named:
        kind = type(value)
        if name in constexprs and kind not in SCALAR_ARGS and not isinstance(value, torch.dtype):
            raise BadLaunch(
                f"kernel argument {name} is a tl.constexpr handed a {kind.__name__}: a constexpr is a "
                "number, bool, string, None or torch dtype"
            )
        if descriptor is not None and kind is descriptor:
            fields = (*value.shape, *value.strides, *value.block_shape)
            if any(type(x) is not int for x in fields):
                raise BadLaunch(f"kernel argument {name}: a tensor descriptor's shape, strides and block are ints")
            value, kind = value.base, type(value.base)
        if kind in TENSOR_ARGS:
            storage = value.untyped_storage()
            if storage.nbytes():
                spans.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes()))
        elif kind not in SCALAR_ARGS and not isinstance(value, torch.dtype):
            raise BadLaunch(
                f"kernel argument {name} is a {kind.__name__}: a launch takes tensors (torch.Tensor), numbers, "
                "bools, strings, None or torch dtypes only (the interpreter would run anything else as Python)"
            )
    return spans


@dataclass
class Launch:
    name: str
    candidate: bool
    stream: int | None = None
    seconds: float = 0.0


@dataclass
class Window:
    """Launches recorded between `begin()` and `end()` (one forward)."""

    launches: list[Launch] = field(default_factory=list)

    def candidate_launches(self) -> list[Launch]:
        return [x for x in self.launches if x.candidate]

    def candidate_seconds(self) -> float:
        return sum(x.seconds for x in self.launches if x.candidate)


def _kernel_source_file(jit_obj: Any) -> str | None:
    fn = getattr(jit_obj, "fn", None)
    code = getattr(fn, "__code__", None)
    return getattr(code, "co_filename", None)


def _kernel_span(jit_obj: Any) -> tuple[str, int, int] | None:
    """(name, first line, last line) of a jit function's source. The interpreter runs a rewrite of the body
    compiled under the same file name and def line, so a frame is this kernel's when its code starts inside
    the span (a plain function of the same name elsewhere in the file does not)."""
    code = getattr(getattr(jit_obj, "fn", None), "__code__", None)
    if code is None:
        return None
    last = max((line for _, _, line in code.co_lines() if line is not None), default=code.co_firstlineno)
    return code.co_name, code.co_firstlineno, last


def jit_functions(module: ModuleType) -> list[Any]:
    """The module's Triton kernels: JITFunction-like globals, unwrapping Autotuner/Heuristics via `.fn`."""
    from triton.runtime.jit import KernelInterface

    found, seen = [], set()
    for value in list(vars(module).values()):
        obj = value
        while isinstance(obj, KernelInterface) and id(obj) not in seen:
            seen.add(id(obj))
            inner = getattr(obj, "fn", None)
            if isinstance(inner, KernelInterface):
                obj = inner
                continue
            found.append(obj)
            break
    return found


class LaunchRecorder:
    """Installed once per evaluation child, before the candidate is imported."""

    def __init__(self, candidate_file: str, max_programs: int | None = None) -> None:
        self.candidate_file = candidate_file
        self.max_programs = max_programs  # triton-ascend's per-launch limit on NPU (ascend_grid.py)
        self.candidate_names: set[str] = set()
        self.kernel_spans: dict[str, list[tuple[int, int]]] = {}  # name -> (first, last) lines of its jit sources
        self._window: Window | None = None
        self._patched: list[tuple[type, str, Any]] = []  # (class, attribute, original)
        self._hook_chain: Any = None
        self._current: Launch | None = None  # the wrapper launch in progress (the hook annotates it)
        self.hook_api = "none"
        self.track_foreign = False
        self._grid_start: float | None = None  # interpreter: when the running launch's programs began and ended
        self._grid_end: float | None = None
        self._guard: TritonCounter | None = None  # interpreter: bounds of every access to the launch's tensors

    # -- installation -------------------------------------------------------------------------
    def install(self) -> None:
        from triton.runtime.jit import JITFunction

        classes: list[type] = [JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction

            classes.append(InterpretedFunction)
            self._guard = TritonCounter(allowed=[], counting=False).__enter__()
        except ImportError:
            pass
        for cls in classes:
            self._wrap_run(cls)
        self._mark_programs()
        self._install_hook()

    def _mark_programs(self) -> None:
        """Under the interpreter, note when a launch's programs start (the grid's size is set just before the first)
        and end (the last restore of the language patches follows the last program): the time between is the
        kernel's, not the launcher's copies of the arguments, its grid function or pre-run hooks (red-team findings
        F6, F7 of issue 35 ran torch work there). Left out where the interpreter has no such methods."""
        try:
            from triton.runtime import interpreter
        except ImportError:
            return
        builder, scope = getattr(interpreter, "InterpreterBuilder", None), getattr(interpreter, "_LangPatchScope", None)
        if builder is None or scope is None or not hasattr(builder, "set_grid_dim") or not hasattr(scope, "restore"):
            return
        recorder = self
        set_grid_dim, restore = builder.set_grid_dim, scope.restore

        def marked_set_grid_dim(builder_self: Any, *args: Any) -> Any:
            recorder._grid_start = time.perf_counter()
            return set_grid_dim(builder_self, *args)

        def marked_restore(scope_self: Any) -> Any:
            result = restore(scope_self)
            recorder._grid_end = time.perf_counter()
            return result

        builder.set_grid_dim, scope.restore = marked_set_grid_dim, marked_restore
        self._patched += [(builder, "set_grid_dim", set_grid_dim), (scope, "restore", restore)]

    def _wrap_run(self, cls: type) -> None:
        original = cls.run
        recorder = self

        def run(jit_self: Any, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("warmup"):
                return original(jit_self, *args, **kwargs)
            spans = launch_spans(jit_self, args, kwargs)
            if recorder.max_programs is not None:
                check_programs(launch_grid(jit_self, args, kwargs), recorder.max_programs)
            guard = recorder._guard
            bounds = guard.allowed() if guard is not None else None
            launch = recorder._note_jit(jit_self)
            outer, recorder._current = recorder._current, launch
            foreign = [0.0]
            profiling = launch is not None and launch.candidate and recorder.track_foreign
            recorder._grid_start = recorder._grid_end = None
            previous = sys.getprofile() if profiling else None
            if profiling:
                sys.setprofile(recorder._foreign_profiler(foreign))
            t0 = time.perf_counter()
            try:
                if guard is not None:
                    guard.set_allowed(spans)
                return original(jit_self, *args, **kwargs)
            finally:
                elapsed = time.perf_counter() - t0
                if guard is not None:
                    guard.set_allowed(bounds or [])
                if profiling:
                    sys.setprofile(previous)
                recorder._current = outer
                start, end = recorder._grid_start, recorder._grid_end
                if start is not None and end is not None and end >= start:
                    elapsed = end - start  # the programs only, not the launcher around them
                if launch is not None:
                    launch.seconds = max(0.0, elapsed - foreign[0])

        run.__wrapped__ = original  # type: ignore[attr-defined]
        cls.run = run  # type: ignore[method-assign]
        self._patched.append((cls, "run", original))

    def _install_hook(self) -> None:
        try:
            from triton import knobs

            chain = knobs.runtime.launch_enter_hook
        except (ImportError, AttributeError):
            return
        if hasattr(chain, "add") and hasattr(chain, "remove"):
            chain.add(self._hook)
            self._hook_chain = chain
            self.hook_api = "knobs.runtime.launch_enter_hook (HookChain)"

    def uninstall(self) -> None:
        if self._guard is not None:
            self._guard.__exit__(None, None, None)
            self._guard = None
        for cls, name, original in reversed(self._patched):
            setattr(cls, name, original)
        self._patched.clear()
        if self._hook_chain is not None:
            self._hook_chain.remove(self._hook)
            self._hook_chain = None

    def guarded_objects(self) -> list[tuple[Any, str]]:
        """(owner, attribute) pairs the tamper check must see unchanged."""
        pairs: list[tuple[Any, str]] = [(cls, name) for cls, name, _ in self._patched]
        if self._guard is not None:
            pairs += [(cls, name) for cls, name, _ in self._guard._saved]
        try:
            from triton import knobs

            pairs.append((knobs.runtime, "launch_enter_hook"))
        except ImportError:
            pass
        return pairs

    def hook_still_installed(self) -> bool:
        return self._hook_chain is None or self._hook in getattr(self._hook_chain, "calls", [self._hook])

    def _foreign_profiler(self, acc: list[float]) -> Any:
        """A sys.setprofile function that adds to acc[0] the time a candidate kernel body (interpreter)
        spends in calls to anything that is not Triton or another candidate kernel."""
        import triton

        triton_dir = os.path.dirname(os.path.abspath(triton.__file__))
        spans, path = self.kernel_spans, self.candidate_file

        def body(code: Any) -> bool:
            return code.co_filename == path and any(
                lo <= code.co_firstlineno <= hi for lo, hi in spans.get(code.co_name, ())
            )

        def kernelish(code: Any) -> bool:
            return code.co_filename.startswith(triton_dir) or body(code)

        open_call: list[Any] = []  # [frame, c function or None, start] of the foreign call in progress
        depth = [0]  # kernel-body frames running: only their time is kernel time (the launcher's is not counted)

        def profiler(frame: Any, event: str, arg: Any) -> None:
            if event == "call":
                code, caller = frame.f_code, frame.f_back
                if body(code):
                    depth[0] += 1
                    return
                if open_call or not depth[0]:
                    return
                if code.co_filename == path or (caller is not None and body(caller.f_code) and not kernelish(code)):
                    open_call[:] = [frame, None, time.perf_counter()]
                return
            if event == "return" and body(frame.f_code):  # a body frame is never the foreign call in progress
                depth[0] -= 1
                return
            if event == "c_call":
                if not open_call and depth[0] and body(frame.f_code):
                    open_call[:] = [frame, arg, time.perf_counter()]
            elif (
                open_call
                and open_call[0] is frame
                and (
                    (event == "return" and open_call[1] is None)
                    or (event in ("c_return", "c_exception") and open_call[1] is arg)
                )
            ):
                acc[0] += time.perf_counter() - open_call[2]
                open_call.clear()

        return profiler

    # -- recording ----------------------------------------------------------------------------
    def _note_jit(self, jit_obj: Any) -> Launch | None:
        is_candidate = _kernel_source_file(jit_obj) == self.candidate_file
        name = getattr(getattr(jit_obj, "fn", None), "__name__", None) or "?"
        if is_candidate:
            self._add_kernel(jit_obj)
        if self._window is None:
            return None
        launch = Launch(name, is_candidate, None, 0.0)
        self._window.launches.append(launch)
        return launch

    def note_module(self, module: ModuleType) -> list[str]:
        """Register the candidate module's kernels by name (the launch hook only knows names)."""
        for obj in jit_functions(module):
            if _kernel_source_file(obj) == self.candidate_file:
                self._add_kernel(obj)
        return sorted(self.candidate_names)

    def _add_kernel(self, jit_obj: Any) -> None:
        self.candidate_names.add(getattr(jit_obj.fn, "__name__", "?"))
        span = _kernel_span(jit_obj)
        if span is not None and span[1:] not in self.kernel_spans.setdefault(span[0], []):
            self.kernel_spans[span[0]].append(span[1:])

    def _hook(self, metadata: Any) -> None:
        if self._window is None:
            return
        data = metadata.get() if hasattr(metadata, "get") and callable(metadata.get) else metadata
        try:
            name, stream = data["name"], data.get("stream")
        except (KeyError, TypeError, AttributeError):
            return
        # Compiled launches of JIT functions pass through the wrapper, which decided whose kernel it is;
        # the hook only adds the stream. A launch outside any wrapper is never the candidate's.
        if self._current is not None:
            self._current.stream = stream
        else:
            self._window.launches.append(Launch(str(name), False, stream, 0.0))

    def begin(self) -> None:
        self._window = Window()

    def end(self) -> Window:
        window, self._window = self._window or Window(), None
        return window
