"""The process under test, as the trusted judge drives it: the same loop for the reference and the candidate.

The judge hands over inputs ("stage"), asks for k calls ("run": k forwards, one per staged input set,
then a device-wide sync, then the reply), and only then, outside its timed window, asks for what the
calls returned ("collect"; on CUDA the outputs are already in buffers the judge owns and bound to
this runner ("bind"): "run" copies them there before its sync, "fill" does it for untimed passes). So
both models are timed as black boxes, the same way, on the judge's clock; nothing here measures time.
Replies follow drkernel.verify.process.protocol; orders from the judge arrive pickled (the judge alone writes
that channel: CUDA IPC handles of its own tensors travel that way).
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from typing import Any

import torch

from drkernel.verify.harness.ascend_grid import MAX_PROGRAMS as ASCEND_MAX_PROGRAMS
from drkernel.verify.harness.launches import LaunchRecorder
from drkernel.verify.harness.tamper import HarnessSnapshot
from drkernel.verify.judging.backends import Backend
from drkernel.verify.process import protocol
from drkernel.verify.process.sandbox import descendants


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
            if (
                so.nbytes()
                and sx.nbytes()
                and so.data_ptr() < sx.data_ptr() + sx.nbytes()
                and sx.data_ptr() < so.data_ptr() + so.nbytes()
            ):
                return True
    return False


def tensor_spec(t: torch.Tensor) -> dict[str, Any]:
    return {
        "kind": "tensor",
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": list(t.shape),
        "nbytes": t.numel() * t.element_size(),
        "device": t.device.type,
    }


_TRITON_COMPILE_ERRORS = {
    "CompilationError",
    "CompileTimeAssertionFailure",
    "UnsupportedLanguageConstruct",
    "MLIRCompilationError",
    "InterpreterError",
    "AscendGridTooLarge",
}


def classify(exc: BaseException, model_file: str, kernel_names: set[str]) -> str:
    """runtime vs triton_compile: Triton's compiler errors, or a failure inside a kernel body
    (under the interpreter the kernel runs as Python compiled from the model's file)."""
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in chain:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    for e in chain:
        if type(e).__name__ in _TRITON_COMPILE_ERRORS or type(e).__module__.startswith("triton.compiler"):
            return "triton_compile"
        tb = e.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_filename == model_file and code.co_name in kernel_names:
                return "triton_compile"
            tb = tb.tb_next
    return "runtime"


# Process-wide switches of floating-point arithmetic (issue 35): the reference computes in its own process with the
# defaults, so a candidate that flips one (fp32 matmuls in TF32 or bf16, reduced-precision reductions) computes other
# arithmetic than it is compared and timed against. Read before the candidate is imported and after its calls.
NUMERICS_SWITCHES: tuple[tuple[str, Callable[[], Any]], ...] = (
    ("torch.get_float32_matmul_precision()", lambda: torch.get_float32_matmul_precision()),
    ("torch.backends.cuda.matmul.allow_tf32", lambda: torch.backends.cuda.matmul.allow_tf32),
    (
        "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
        lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
    ),
    (
        "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
        lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    ),
    ("torch.backends.cudnn.allow_tf32", lambda: torch.backends.cudnn.allow_tf32),
    ("torch.backends.fp32_precision", lambda: torch.backends.fp32_precision),
    ("torch.backends.cuda.matmul.fp32_precision", lambda: torch.backends.cuda.matmul.fp32_precision),
    ("torch.backends.cudnn.conv.fp32_precision", lambda: torch.backends.cudnn.conv.fp32_precision),
    ("torch.backends.mkldnn.matmul.fp32_precision", lambda: torch.backends.mkldnn.matmul.fp32_precision),
)


def numerics() -> dict[str, str]:
    """The current value of every numerics switch this torch has."""
    out = {}
    for name, read in NUMERICS_SWITCHES:
        try:
            out[name] = repr(read())
        except (AttributeError, RuntimeError):
            continue
    return out


class Observer:
    """Runs each forward under launch recording and collects the evidence the judge gets.

    Both runners use this same class, so the Python work around every timed call (launch recording,
    the aliasing check, the stream lookup) is identical for the reference and the candidate: a cost the
    harness adds per call must not be charged to one side only. Only the candidate's evidence is used
    against it; the reference's aliasing tells the judge that the candidate doing the same is no hack."""

    def __init__(
        self, model_file: str, backend: Any, require_triton: bool, kernel_names: list[str], watch_process: bool = True
    ) -> None:
        self.backend, self.path, self.require_triton = backend, model_file, require_triton
        self.watch_process = watch_process  # tamper and side-process checks: the candidate's process only
        self.recorder = LaunchRecorder(model_file, ASCEND_MAX_PROGRAMS if backend.name == "npu" else None)
        self.kernel_names: set[str] = set(kernel_names)
        self.tampered: list[str] = []
        self.decoy_calls: list[str] = []
        self.side_processes: list[str] = []
        self.stream_mismatch: list[str] = []
        self.alias_calls: list[str] = []
        self.launches = 0
        self.kernel_s = 0.0  # wall time inside the candidate's own launches over every observed call (CPU coverage)
        self.snapshot: HarnessSnapshot | None = None
        self.numerics: dict[str, str] = {}

    def install(self) -> None:
        self.recorder.install()
        self.snapshot = HarnessSnapshot(self.recorder.guarded_objects())
        self.numerics = numerics()

    def check_tamper(self) -> None:
        changed = self.snapshot.changed() if self.snapshot else []
        if not self.recorder.hook_still_installed():
            changed.append("triton launch_enter_hook chain")
        now = numerics()
        changed += [f"{k}: {v} -> {now.get(k)}" for k, v in self.numerics.items() if now.get(k) != v]
        if changed and not self.tampered:
            self.tampered = changed

    def observe(self, label: str, call: Callable[[], Any], inputs: list[Any]) -> Any:
        """One forward inside the timed window: only launch recording here, no sync, no slow checks."""
        self.recorder.begin()
        try:
            out = call()
        except Exception as e:
            self.recorder.end()
            kind = classify(e, self.path, self.kernel_names | self.recorder.candidate_names)
            raise Fault(kind, short(e), protocol.traceback_tail()) from e
        window = self.recorder.end()
        if len(self.alias_calls) < 5 and aliases(flatten(out), inputs):
            self.alias_calls.append(label)
        mine = window.candidate_launches()
        self.launches += len(mine)
        self.kernel_s += window.candidate_seconds()
        if self.require_triton and not mine:
            self.decoy_calls.append(label)
        harness_stream = self.backend.current_stream()
        for launch in mine:
            if launch.stream is not None and harness_stream is not None and launch.stream != harness_stream:
                self.stream_mismatch.append(f"{launch.name} on stream {launch.stream:#x} in {label}")
        return out

    def evidence(self) -> dict[str, Any]:
        """Checked after the timed window: harness tampering, and processes alive after the calls (Triton's
        compilers have exited by then; this process is a subreaper, so double-forked orphans count too)."""
        if not self.watch_process:
            return {"aliases": self.alias_calls[:5], "launches": self.launches, "kernel_s": self.kernel_s}
        self.check_tamper()
        if not self.side_processes:
            self.side_processes = [f"pid {pid} alive after the calls" for pid in descendants(os.getpid())]
        return {
            "decoy_calls": self.decoy_calls[: protocol.MAX_LIST],
            "tampered": self.tampered[:20],
            "side_processes": self.side_processes[:5],
            "stream_mismatch": self.stream_mismatch[:5],
            "aliases": self.alias_calls[:5],
            "launches": self.launches,
            "kernel_s": self.kernel_s,
        }


class Runner:
    """Serves the judge's orders for one model until told to exit or the channel closes.

    `observe(label, call, inputs)` runs one forward and returns its raw result (the candidate wraps it with
    launch recording and the tamper check); `evidence()` is what that observation saw so far;
    `coverage()` answers the coverage order (candidate only)."""

    def __init__(
        self,
        conn: Any,
        backend: Backend,
        model: Any,
        observe: Callable[[str, Callable[[], Any], list[Any]], Any],
        evidence: Callable[[], dict[str, Any]] | None = None,
        coverage: Callable[[list[Any]], tuple[dict[str, Any], list[Any]]] | None = None,
    ) -> None:
        self.conn, self.backend, self.model = conn, backend, model
        self.observe, self.evidence, self.coverage = observe, evidence, coverage
        self.trace: Callable[[list[Any]], tuple[dict[str, Any], bytes]] | None = None  # CPU model (candidate)
        self.ipc = backend.name == "cuda"
        self.staged: list[list[Any]] = []
        self.bound: list[list[Any]] = []  # CUDA: the judge's output buffers, one list per call
        self.outputs: list[list[Any]] = []
        self.encoded: tuple[list[list[dict[str, Any]]], list[bytes]] | None = None  # outputs as sent, if done
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
                self.reply({"type": "fault", "kind": f.kind, "message": f.message, "detail": f.detail, "phase": verb})
                return
            except Exception as e:  # a harness failure in this process: still this process's verdict
                self.reply(
                    {
                        "type": "fault",
                        "kind": "runtime",
                        "message": f"harness: {short(e)}",
                        "detail": protocol.traceback_tail(3000),
                        "phase": verb,
                    }
                )
                return

    # -- orders ---------------------------------------------------------------------------------------
    def _stage(self, sets: list[Any] | None, reuse: bool) -> None:
        """New input sets (CUDA: tensors the judge owns, through IPC; else raw bytes). With `reuse`, the
        new values go into the storage of the sets staged before (a cache keyed on data_ptr replays)."""
        self.outputs, self.encoded = [], None
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

    def _run(self, k: int, digest: bool = False) -> None:
        """k forwards on the first k staged sets, a device-wide sync, then the reply: the judge's timer.
        With `digest` (CPU, NPU) the outputs are checked and encoded as "collect" will send them, and the
        reply carries a hash of those bytes: the judge's clock stops only once the outputs exist, so work
        moved from here into "collect" cannot hide (the judge rehashes what it collects)."""
        outputs = []
        self.encoded = None
        with torch.no_grad():
            for i in range(k):
                inputs = self.staged[i]
                outputs.append(self.observe(f"call {self.calls}", functools.partial(self.model, *inputs), inputs))
                self.calls += 1
        self.outputs = outputs
        if self.ipc and len(self.bound) >= k:
            self._write_bound()
        try:
            self.backend.synchronize()
        except Exception as e:  # an asynchronous device fault of the calls above
            raise Fault("runtime", short(e), protocol.traceback_tail()) from e
        header: dict[str, Any] = {"type": "ran", "digest": None}
        if digest:
            self.encoded = self._encode(self._checked())
            h = hashlib.blake2b(digest_size=32)
            for chunk in self.encoded[1]:
                h.update(chunk)
            header["digest"] = h.hexdigest()
        self.reply(header)

    @staticmethod
    def _encode(calls: list[list[Any]]) -> tuple[list[list[dict[str, Any]]], list[bytes]]:
        specs, chunks = [], []
        for values in calls:
            s, data = protocol.encode_values([v.to("cpu") if isinstance(v, torch.Tensor) else v for v in values])
            specs.append(s)
            chunks.append(data)
        return specs, chunks

    def _evidence(self) -> dict[str, Any]:
        """Gathered after the timed window (the tamper and process checks cost milliseconds)."""
        return self.evidence() if self.evidence else {}

    def _checked(self) -> list[list[Any]]:
        return [plain_outputs(out, self.backend.name) for out in self.outputs]

    def _collect(self) -> None:
        """Raw bytes of every output of the last run (CPU, NPU; encoded already when the run was digested),
        and of the inputs as they are now."""
        specs, chunks = self.encoded if self.encoded is not None else self._encode(self._checked())
        inputs, data = self._encode(self.staged[: len(specs)])
        chunks = [*chunks, *data]
        self.outputs, self.encoded = [], None
        self.reply(
            {"type": "outputs", "calls": specs, "inputs": inputs, "evidence": self._evidence()}, b"".join(chunks)
        )

    def _describe(self) -> None:
        """CUDA: what the outputs are (dtype, shape), so the judge can allocate buffers for them."""
        calls = self._checked()
        specs = [
            [tensor_spec(v) if isinstance(v, torch.Tensor) else protocol.scalar_spec(v) for v in values]
            for values in calls
        ]
        self.reply({"type": "outputs", "calls": specs, "inputs": None, "evidence": self._evidence()})

    def _bind(self, buffers: list[list[Any]]) -> None:
        """CUDA: the judge's output buffers (one list per call), kept for the rounds that follow."""
        self.bound = buffers
        self.reply({"type": "bound"})

    def _write_bound(self) -> None:
        """Copy each output tensor into the judge's buffer for it (no sync: the caller syncs). An output
        that does not match its buffer is left out; the judge's spec check then decides."""
        with torch.no_grad():
            for values, bufs in zip(self._checked(), self.bound):
                for v, b in zip(values, bufs):
                    if (
                        isinstance(v, torch.Tensor)
                        and isinstance(b, torch.Tensor)
                        and v.shape == b.shape
                        and v.dtype == b.dtype
                    ):
                        b.copy_(v)

    def _fill(self) -> None:
        """CUDA: the outputs of the last run or coverage pass into the bound buffers, outside any timing."""
        self._write_bound()
        self.backend.synchronize()
        self.outputs = []
        self.reply({"type": "filled"})

    def _coverage(self, k: int) -> None:
        """The coverage pass over the k input sets the judge staged for it (each once, like any round);
        its outputs are collected and compared like every other call's."""
        if self.coverage is None:
            raise Fault("runtime", "this runner does not measure coverage")
        report, outputs = self.coverage(self.staged[:k])
        self.outputs, self.encoded = outputs, None
        self.reply({"type": "coverage", **report})

    def _trace(self) -> None:
        """CPU cost model: one forward on the first staged set, reported as data (drkernel.verify.cost_model.trace).
        Nothing in it is believed: the judge has a trusted process replay it on inputs this one never saw."""
        if self.trace is None:
            raise Fault("runtime", "this runner does not trace")
        from drkernel.verify.cost_model.trace import TraceError

        try:
            header, payload = self.trace(self.staged[0])
        except TraceError as e:
            raise Fault("runtime", f"the forward cannot be traced for the CPU model: {e}") from e
        self.reply({"type": "trace", **header}, payload)
