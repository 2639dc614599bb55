"""The process under test, as the trusted judge drives it: the same loop for the reference and the candidate.

The judge hands over inputs ("stage"), asks for k calls ("run": k forwards, one per staged input set,
then a device-wide sync, then the reply), and only then, outside its timed window, asks for what the
calls returned ("collect"; on CUDA "describe" + "fill", which copies each output into a buffer the
judge owns). So both models are timed as black boxes, the same way, on the judge's clock; nothing
here measures time. Replies follow drkernel.verify.protocol; orders from the judge arrive pickled
(the judge alone writes that channel: CUDA IPC handles of its own tensors travel that way).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import torch

from drkernel.verify import protocol
from drkernel.verify.devices import Backend


class Fault(Exception):
    """A call went wrong in a way that decides the verdict (a candidate fault, or a reference failure)."""

    def __init__(self, kind: str, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.kind, self.message, self.detail = kind, message, detail


def short(exc: BaseException, limit: int = 2000) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[:limit] + " ..."


def flatten(value: Any) -> list[Any]:
    """Outputs as a flat list: a tensor, or a (nested) tuple/list of tensors and scalars."""
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in flatten(item)]
    return [value]


def plain_outputs(value: Any, device_type: str) -> list[Any]:
    """Check what a forward returned before anything of it is reported: plain tensors on the evaluation
    device (no subclasses, no meta tensors) or plain scalars. Raises Fault("output_mismatch")."""
    leaves = flatten(value)
    if len(leaves) > protocol.MAX_LIST:
        raise Fault("output_mismatch", f"{len(leaves)} output values; at most {protocol.MAX_LIST} are compared")
    out: list[Any] = []
    for i, v in enumerate(leaves):
        where = f"output[{i}]" if len(leaves) > 1 else "output"
        if isinstance(v, torch.nn.Parameter):
            v = v.data
        if isinstance(v, torch.Tensor):
            if type(v) is not torch.Tensor:
                raise Fault("output_mismatch", f"{where} is a {type(v).__name__}, not a plain torch.Tensor")
            if v.device.type != device_type:
                raise Fault("output_mismatch", f"{where} is on device {v.device.type}, expected {device_type}")
            if str(v.dtype).removeprefix("torch.") not in protocol.ITEMSIZE:
                raise Fault("output_mismatch", f"{where} has dtype {v.dtype}, which the verifier does not compare")
            out.append(v.detach())
        elif isinstance(v, (bool, int, float, str, type(None))):
            try:
                protocol.scalar_spec(v)
            except ValueError as e:
                raise Fault("output_mismatch", f"{where}: {e}") from e
            out.append(v)
        else:
            raise Fault("output_mismatch", f"{where} is a {type(v).__name__}, which cannot be compared")
    return out


def aliases(outputs: list[Any], inputs: list[Any]) -> bool:
    """True when an output shares any byte of storage with an input (views, `as_strided`, the same tensor)."""
    for o in outputs:
        if not isinstance(o, torch.Tensor) or o.device.type == "meta":
            continue
        so = o.untyped_storage()
        for x in inputs:
            if not isinstance(x, torch.Tensor) or x.device != o.device:
                continue
            sx = x.untyped_storage()
            if so.nbytes() and sx.nbytes() and so.data_ptr() < sx.data_ptr() + sx.nbytes() \
                    and sx.data_ptr() < so.data_ptr() + so.nbytes():
                return True
    return False


def tensor_spec(t: torch.Tensor) -> dict[str, Any]:
    return {"kind": "tensor", "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
            "nbytes": t.numel() * t.element_size(), "device": t.device.type}


class Runner:
    """Serves the judge's orders for one model until told to exit or the channel closes.

    `observe(label, call, inputs)` runs one forward and returns its raw result (the candidate wraps it with
    launch recording and the tamper check); `evidence()` is what that observation saw so far;
    `coverage()` answers the coverage order (candidate only)."""

    def __init__(self, conn: Any, backend: Backend, model: Any, observe: Callable[[str, Callable[[], Any], list[Any]], Any],
                 evidence: Callable[[], dict[str, Any]] | None = None,
                 coverage: Callable[[list[Any]], dict[str, Any]] | None = None) -> None:
        self.conn, self.backend, self.model = conn, backend, model
        self.observe, self.evidence, self.coverage = observe, evidence, coverage
        self.ipc = backend.name == "cuda"
        self.staged: list[list[Any]] = []
        self.outputs: list[list[Any]] = []
        self.calls = 0

    def reply(self, header: dict[str, Any], payload: bytes | None = None) -> None:
        protocol.send(self.conn, header, payload)

    def serve(self) -> None:
        while True:
            try:
                order = self.conn.recv()
            except (EOFError, OSError):
                return
            verb = order[0]
            if verb == "exit":
                return
            try:
                getattr(self, "_" + verb)(*order[1:])
            except Fault as f:
                self.reply({"type": "fault", "kind": f.kind, "message": f.message, "detail": f.detail,
                            "phase": verb})
                return
            except Exception as e:  # a harness failure in this process: still this process's verdict
                self.reply({"type": "fault", "kind": "runtime", "message": f"harness: {short(e)}",
                            "detail": traceback.format_exc()[-3000:], "phase": verb})
                return

    # -- orders ---------------------------------------------------------------------------------------
    def _stage(self, sets: list[Any] | None, reuse: bool) -> None:
        """New input sets (CUDA: tensors the judge owns, through IPC; else raw bytes). With `reuse`, the
        new values go into the storage of the sets staged before (a cache keyed on data_ptr replays)."""
        self.outputs = []
        if sets is not None:
            fresh = [self._materialise(s) for s in sets]
            if reuse:
                for old, new in zip(self.staged, fresh):
                    for a, b in zip(old, new):
                        if isinstance(a, torch.Tensor):
                            a.copy_(b)
            else:
                self.staged = fresh
        self.backend.synchronize()
        self.reply({"type": "staged"})

    def _materialise(self, item: Any) -> list[Any]:
        if self.ipc:
            return list(item)
        specs, payload = item
        values, _ = protocol.decode_values(specs, payload)
        return [v.to(self.backend.device) if isinstance(v, torch.Tensor) else v for v in values]

    def _run(self, k: int) -> None:
        """k forwards on the first k staged sets, a device-wide sync, then the reply: the judge's timer."""
        outputs = []
        with torch.no_grad():
            for i in range(k):
                inputs = self.staged[i]
                outputs.append(self.observe(f"call {self.calls}", lambda: self.model(*inputs), inputs))
                self.calls += 1
        try:
            self.backend.synchronize()
        except Exception as e:  # an asynchronous device fault of the calls above
            raise Fault("runtime", short(e), traceback.format_exc()[-4000:]) from e
        self.outputs = outputs
        self.reply({"type": "ran"})

    def _evidence(self) -> dict[str, Any]:
        """Gathered after the timed window (the tamper and process checks cost milliseconds)."""
        return self.evidence() if self.evidence else {}

    def _checked(self) -> list[list[Any]]:
        return [plain_outputs(out, self.backend.name) for out in self.outputs]

    def _collect(self, with_inputs: bool) -> None:
        """Raw bytes of every output of the last run (CPU, NPU), and of the inputs as they are now."""
        calls = self._checked()
        specs, chunks = [], []
        for values in calls:
            s, data = protocol.encode_values([v.to("cpu") if isinstance(v, torch.Tensor) else v for v in values])
            specs.append(s)
            chunks.append(data)
        inputs = None
        if with_inputs:
            inputs = []
            for values in self.staged[:len(calls)]:
                s, data = protocol.encode_values([v.to("cpu") if isinstance(v, torch.Tensor) else v for v in values])
                inputs.append(s)
                chunks.append(data)
        self.outputs = []
        self.reply({"type": "outputs", "calls": specs, "inputs": inputs, "evidence": self._evidence()},
                   b"".join(chunks))

    def _describe(self) -> None:
        """CUDA: what the outputs are (dtype, shape), so the judge can allocate buffers for them."""
        calls = self._checked()
        specs = [[tensor_spec(v) if isinstance(v, torch.Tensor) else protocol.scalar_spec(v) for v in values]
                 for values in calls]
        self.reply({"type": "outputs", "calls": specs, "inputs": None, "evidence": self._evidence()})

    def _fill(self, buffers: list[list[Any]]) -> None:
        """CUDA: copy each output tensor into the judge's buffer for it, sync, drop the outputs."""
        calls = self._checked()
        with torch.no_grad():
            for values, bufs in zip(calls, buffers):
                for v, b in zip(values, bufs):
                    if isinstance(v, torch.Tensor) and isinstance(b, torch.Tensor):
                        b.copy_(v)
        self.backend.synchronize()
        self.outputs = []
        self.reply({"type": "filled"})

    def _drop(self) -> None:
        """Release staged inputs and outputs (the judge can then reuse or free that memory)."""
        self.staged, self.outputs = [], []
        self.backend.synchronize()
        self.backend.release_memory()
        self.reply({"type": "staged"})

    def _coverage(self) -> None:
        if self.coverage is None:
            raise Fault("runtime", "this runner does not measure coverage")
        self.reply({"type": "coverage", **self.coverage(self.staged[:1])})
