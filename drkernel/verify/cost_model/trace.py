"""The candidate's forward as data (issue 13): what its process reports for the CPU cost model.

Recorded inside the candidate's (hostile) process, so nothing here is believed: the trace is a program
that a trusted replay (drkernel.verify.cost_model.replay) runs on inputs the candidate never saw, with only the
gated jit functions rebuilt from source; the replay's output must equal the reference's, and only what
the replay executes is counted. A trace that omits work, hides it in host code, lies about buffers or
carries data-dependent literals replays wrong, and that is a fail.

Trace format (JSON, validated by protocol.validate_trace):
- buffers: id -> {"kind": "input", "index": i} | {"kind": "state", "nbytes": n} (bytes in the payload,
  in id order; their digests were committed at load, before any input existed) | {"kind": "literal",
  "nbytes": n} (bytes in the payload: a tensor made from host data in the forward, torch.tensor([...]);
  no digest: made from the inputs the trace saw, it is wrong for the replay's) | {"kind": "fresh",
  "nbytes": n} (made by an event of this trace).
- events: {"op": "alloc", "buf": id, "nbytes": n} | {"op": "aten", "name": "aten::add.Tensor", "args":
  [...], "kwargs": {...}, "outs": [ref | null ...]} | {"op": "launch", "kernel": name, "grid": [x, y, z],
  "args": {param: value}}.
- outputs: [ref ...], the tensors the forward returned.
A ref is {"buf": id, "offset": elements, "shape": [...], "stride": [...], "dtype": name}, plus "conj": true /
"neg": true for a lazily conjugated / negated view (torch's conj and neg bits); a value is
null, bool, int, float, {"float": "inf"|"-inf"|"nan"}, {"t": ref}, {"list": [...]}, {"dtype": name},
{"device": name}, {"layout": name}, {"memory_format": name}, or a short string.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from drkernel.perfmodel.aten_count import is_free, op_name
from drkernel.verify.harness.ascend_grid import launch_grid
from drkernel.verify.process import protocol

MAX_STATE = 256  # committed state tensors
MAX_EVENTS = 512
ALLOC_OPS = frozenset(
    {
        "aten::empty.memory_format",
        "aten::empty_strided",
        "aten::empty_like",
        "aten::new_empty",
        "aten::new_empty_strided",
    }
)


class TraceError(Exception):
    """The forward did something the trace cannot describe (the model then fails: nothing is believed)."""


def _walk_tensors(root: Any, out: dict[int, torch.Tensor], depth: int = 0, seen: set[int] | None = None) -> None:
    seen = set() if seen is None else seen
    if depth > 6 or id(root) in seen or len(out) >= MAX_STATE:
        return
    seen.add(id(root))
    if isinstance(root, torch.Tensor):
        if type(root) in (torch.Tensor, torch.nn.Parameter) and root.device.type == "cpu":
            out.setdefault(root.untyped_storage().data_ptr(), root)
        return
    if isinstance(root, torch.nn.Module):
        items: list[Any] = list(root.__dict__.values())
    elif isinstance(root, dict):
        items = list(root.values())
    elif isinstance(root, (list, tuple)):
        items = list(root)
    else:
        return
    for item in items:
        _walk_tensors(item, out, depth + 1, seen)


def storage_digest(t: torch.Tensor) -> str:
    s = t.untyped_storage()
    data = torch.empty(0, dtype=torch.uint8).set_(s, 0, (s.nbytes(),), (1,))
    return hashlib.blake2b(data.numpy().tobytes(), digest_size=32).hexdigest()


def commit_state(model: Any, module_globals: dict[str, Any]) -> tuple[list[str], dict[int, torch.Tensor]]:
    """Digests of every tensor storage reachable from the model and the module's globals, taken at load,
    before any input exists: the only buffers a trace may bring its own bytes for."""
    found: dict[int, torch.Tensor] = {}
    _walk_tensors(model, found)
    _walk_tensors(list(module_globals.values()), found)
    return sorted({storage_digest(t) for t in found.values()}), found


def _float(v: float) -> Any:
    return v if math.isfinite(v) else {"float": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}


class TraceRecorder(TorchDispatchMode):
    """Records one forward: aten operators (dispatch level, outside Triton launches) and Triton launches."""

    def __init__(self, inputs: list[Any], state: dict[int, torch.Tensor]) -> None:
        super().__init__()
        self.buffers: dict[int, dict[str, Any]] = {}
        self.by_storage: dict[int, int] = {}
        self.state_tensors: dict[int, torch.Tensor] = {}  # buffer id -> tensor (bytes go in the payload)
        self.state = state
        self.events: list[dict[str, Any]] = []
        self.in_launch = 0
        # Every storage made in the forward stays alive until it ends: a freed block's address could
        # otherwise come back for a new tensor and read as the old buffer.
        self.keep: list[Any] = []
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor):
                ptr = x.untyped_storage().data_ptr()
                if ptr not in self.by_storage:
                    self._new(ptr, {"kind": "input", "index": i})

    def _new(self, ptr: int, meta: dict[str, Any]) -> int:
        bid = len(self.buffers)
        self.buffers[bid] = meta
        self.by_storage[ptr] = bid
        return bid

    def _event(self, event: dict[str, Any]) -> None:
        if len(self.events) >= MAX_EVENTS:
            raise TraceError(f"more than {MAX_EVENTS} operations in one forward")
        self.events.append(event)

    def ref(self, t: torch.Tensor) -> dict[str, Any]:
        ptr = t.untyped_storage().data_ptr()
        bid = self.by_storage.get(ptr)
        if bid is None:
            held = self.state.get(ptr)
            if held is None:
                raise TraceError("a tensor that is neither an input, committed state, nor made in this forward")
            bid = self._new(ptr, {"kind": "state", "nbytes": held.untyped_storage().nbytes()})
            self.state_tensors[bid] = held
        ref = {
            "buf": bid,
            "offset": t.storage_offset(),
            "shape": list(t.shape),
            "stride": list(t.stride()),
            "dtype": str(t.dtype).removeprefix("torch."),
        }
        # A lazy conjugate or negation (x.conj(), x.conj().imag) is a view the operator resolves itself: without
        # the bit the replay would run different arithmetic from this forward.
        return ref | ({"conj": True} if t.is_conj() else {}) | ({"neg": True} if t.is_neg() else {})

    def value(self, v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return {"t": self.ref(v)}
        if isinstance(v, bool) or v is None or isinstance(v, int):
            return v
        if isinstance(v, float):
            return _float(v)
        if isinstance(v, (list, tuple)):
            return {"list": [self.value(x) for x in v]}
        if isinstance(v, torch.dtype):
            return {"dtype": str(v).removeprefix("torch.")}
        if isinstance(v, torch.device):
            return {"device": v.type}
        if isinstance(v, torch.layout):
            return {"layout": str(v).removeprefix("torch.")}
        if isinstance(v, torch.memory_format):
            return {"memory_format": str(v).removeprefix("torch.")}
        if isinstance(v, str) and len(v) <= 64:
            return v
        raise TraceError(f"an argument of type {type(v).__name__} cannot be traced")

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if self.in_launch:
            return func(*args, **kwargs)
        name = op_name(func)
        if name == "aten::lift_fresh":  # torch.tensor([...]): host data; believed only as a literal
            out = func(*args, **kwargs)
            ptr = out.untyped_storage().data_ptr()
            if ptr not in self.by_storage:
                bid = self._new(ptr, {"kind": "literal", "nbytes": out.untyped_storage().nbytes()})
                self.state_tensors[bid] = out
                self.keep.append(out.untyped_storage())
            return out
        if is_free(func) and name not in ALLOC_OPS:
            return func(*args, **kwargs)
        if name in ALLOC_OPS:
            out = func(*args, **kwargs)
            ptr = out.untyped_storage().data_ptr()
            nbytes = out.untyped_storage().nbytes()
            bid = self._new(ptr, {"kind": "fresh", "nbytes": nbytes})
            self.keep.append(out.untyped_storage())
            self._event({"op": "alloc", "buf": bid, "nbytes": nbytes})
            return out
        event = {
            "op": "aten",
            "name": name,
            "args": [self.value(a) for a in args],
            "kwargs": {k: self.value(v) for k, v in kwargs.items()},
        }
        out = func(*args, **kwargs)
        outs = []
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                outs.append(None)
                continue
            ptr = t.untyped_storage().data_ptr()
            if ptr not in self.by_storage:  # a new tensor; an in-place or out= result names its buffer again
                self._new(ptr, {"kind": "fresh", "nbytes": t.untyped_storage().nbytes()})
                self.keep.append(t.untyped_storage())
            outs.append(self.ref(t))
        event["outs"] = outs
        self._event(event)
        return out

    def launch(self, jit_obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Called by the launch wrapper before a Triton launch runs."""
        names = list(getattr(jit_obj, "arg_names", []))
        bound = dict(zip(names, args))
        bound.update({k: v for k, v in kwargs.items() if k in names})
        grid = launch_grid(jit_obj, args, kwargs)
        if not 1 <= len(grid) <= 3:
            raise TraceError("a grid has one to three dimensions")
        self._event(
            {
                "op": "launch",
                "kernel": getattr(jit_obj.fn, "__name__", "?"),
                "grid": grid + [1] * (3 - len(grid)),
                "args": {k: self.value(v) for k, v in bound.items()},
            }
        )

    def result(self, outputs: list[Any]) -> tuple[dict[str, Any], bytes]:
        refs = []
        for o in outputs:
            if not isinstance(o, torch.Tensor):
                raise TraceError("only tensor outputs can be traced")
            refs.append(self.ref(o))
        chunks = []
        for bid in sorted(self.state_tensors):
            s = self.state_tensors[bid].untyped_storage()
            chunks.append(torch.empty(0, dtype=torch.uint8).set_(s, 0, (s.nbytes(),), (1,)).numpy().tobytes())
        header = {
            "buffers": [self.buffers[i] for i in range(len(self.buffers))],
            "events": self.events,
            "outputs": refs,
        }
        try:  # checked here too, so an honest forward the format cannot carry is a fault, not a broken protocol
            protocol.validate({"type": "trace", **header})
            if len(json.dumps(header, allow_nan=False)) > protocol.MAX_HEADER - 1024:
                raise TraceError(f"the trace exceeds {protocol.MAX_HEADER} bytes")
        except (protocol.ProtocolError, ValueError) as e:
            raise TraceError(str(e)) from e
        return header, b"".join(chunks)


def record(
    call: Callable[[], Any], inputs: list[Any], state: dict[int, torch.Tensor], flatten: Callable[[Any], list[Any]]
) -> tuple[dict[str, Any], bytes]:
    """Run one forward under a TraceRecorder, with Triton launches noted through the run wrappers."""
    from triton.runtime.jit import JITFunction

    classes: list[type] = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:
        pass
    recorder = TraceRecorder(inputs, state)
    saved = [(cls, cls.run) for cls in classes]

    def wrap(original: Any) -> Any:
        def run(jit_self: Any, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("warmup") or recorder.in_launch:
                return original(jit_self, *args, **kwargs)
            recorder.launch(jit_self, args, kwargs)
            recorder.in_launch += 1
            try:
                return original(jit_self, *args, **kwargs)
            finally:
                recorder.in_launch -= 1

        return run

    for cls, original in saved:
        cls.run = wrap(original)  # type: ignore[method-assign]
    try:
        with torch.no_grad(), recorder:
            out = call()
    finally:
        for cls, original in saved:
            cls.run = original  # type: ignore[method-assign]
    return recorder.result(flatten(out))
