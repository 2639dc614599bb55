"""The untrusted side of an evaluation: a sandboxed child that imports the candidate and runs it when told.

It holds no reference output, no seed and no timer: the judge hands it input tensors, times its
replies on the judge's own clock and compares what it returns. What it observes about itself (which
of the candidate's own Triton kernels launched, on which stream, harness tampering, processes left
behind, profiler coverage) is reported as evidence that can only lower a reward.

Before the candidate is imported it sends "isolation" and, if the reference fails to load here,
"reference_failed"; then "importing". The judge believes infra-like messages only before "importing":
after it, candidate code shares this process and could write anything into the channel.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch

from drkernel.verify import problem, protocol
from drkernel.verify.devices import env_for, make_backend
from drkernel.verify.launches import LaunchRecorder
from drkernel.verify.runner import Fault, Runner, aliases, flatten, short
from drkernel.verify.sandbox import capture_output, descendants, isolate
from drkernel.verify.tamper import HarnessSnapshot

_TRITON_COMPILE_ERRORS = {"CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct",
                          "MLIRCompilationError", "InterpreterError"}


def classify(exc: BaseException, candidate_file: str, kernel_names: set[str]) -> str:
    """runtime vs triton_compile: Triton's compiler errors, or a failure inside a kernel body
    (under the interpreter the kernel runs as Python compiled from the candidate's file)."""
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
            if code.co_filename == candidate_file and code.co_name in kernel_names:
                return "triton_compile"
            tb = tb.tb_next
    return "runtime"


class Observer:
    """Runs each candidate forward under launch recording and collects the evidence the judge gets."""

    def __init__(self, spec: dict[str, Any], backend: Any) -> None:
        self.spec, self.backend = spec, backend
        self.path = spec["candidate_path"]
        self.recorder = LaunchRecorder(self.path)
        self.kernel_names: set[str] = set(spec.get("gate_kernels", []))
        self.tampered: list[str] = []
        self.decoy_calls: list[str] = []
        self.side_processes: list[str] = []
        self.stream_mismatch: list[str] = []
        self.alias_calls: list[str] = []
        self.launches = 0
        self.inputs: list[Any] = []
        self.snapshot: HarnessSnapshot | None = None

    def install(self) -> None:
        self.recorder.install()
        self.snapshot = HarnessSnapshot(self.recorder.guarded_objects())

    def check_tamper(self) -> None:
        changed = self.snapshot.changed() if self.snapshot else []
        if not self.recorder.hook_still_installed():
            changed.append("triton launch_enter_hook chain")
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
            raise Fault(kind, short(e), traceback.format_exc()[-4000:]) from e
        window = self.recorder.end()
        if len(self.alias_calls) < 5 and aliases(flatten(out), inputs):
            self.alias_calls.append(label)
        mine = window.candidate_launches()
        self.launches += len(mine)
        if self.spec["require_triton"] and not mine:
            self.decoy_calls.append(label)
        harness_stream = self.backend.current_stream()
        for launch in mine:
            if launch.stream is not None and harness_stream is not None and launch.stream != harness_stream:
                self.stream_mismatch.append(f"{launch.name} on stream {launch.stream:#x} in {label}")
        return out

    def evidence(self) -> dict[str, Any]:
        """Checked after the timed window: harness tampering, and processes alive after the calls (Triton's
        compilers have exited by then; this process is a subreaper, so double-forked orphans count too)."""
        self.check_tamper()
        if not self.side_processes:
            self.side_processes = [f"pid {pid} alive after the calls" for pid in descendants(os.getpid())]
        return {"decoy_calls": self.decoy_calls[:protocol.MAX_LIST], "tampered": self.tampered[:20],
                "side_processes": self.side_processes[:5], "stream_mismatch": self.stream_mismatch[:5],
                "aliases": self.alias_calls[:5], "launches": self.launches}


def _coverage_fn(observer: Observer, backend: Any, model: Any) -> Callable[[list[Any]], dict[str, Any]]:
    def measure(sets: list[Any]) -> dict[str, Any]:
        from drkernel.verify import coverage

        if backend.name == "cpu":
            return coverage.cpu_coverage(observer.recorder, model, sets, calls=2)
        return coverage.device_coverage(observer.recorder, backend, model, sets, calls=3)
    return measure


def main(spec: dict[str, Any], conn: Any) -> None:
    """Entry point of the candidate child (a fork of the warm fork-server)."""
    from drkernel.verify import preload

    try:
        layers = isolate(spec["workdir"], on_accelerator=spec["device"] != "cpu",
                         memory_limit_mb=spec["memory_limit_mb"], env=env_for(spec["device"]))
        layers["preloaded"] = "yes" if preload.preloaded() else "NO (fork-server preload failed)"
        capture_output(spec["workdir"])
        protocol.send(conn, {"type": "isolation", "layers": layers})
        backend = make_backend(spec["device"])
    except Exception as e:
        protocol.send(conn, {"type": "reference_failed", "message": f"candidate sandbox setup failed: {short(e)}"})
        return
    try:
        ref_module = problem.import_file(spec["reference_path"], "reference")
        init_args, init_kwargs = problem.init_inputs(ref_module, backend)
    except Exception as e:
        protocol.send(conn, {"type": "reference_failed", "message": f"reference failed to load: {short(e)}"})
        return
    observer = Observer(spec, backend)
    try:
        observer.install()
        protocol.send(conn, {"type": "importing"})
        model, aliased, load_s = _load(spec, observer, backend, ref_module, init_args, init_kwargs)
        observer.check_tamper()
        protocol.send(conn, {"type": "loaded", "load_s": load_s, "kernels": sorted(observer.kernel_names),
                             "launch_hook": observer.recorder.hook_api, "aliased": aliased})
        Runner(conn, backend, model, observer.observe, observer.evidence,
               _coverage_fn(observer, backend, model)).serve()
    except Fault as f:
        protocol.send(conn, {"type": "fault", "kind": f.kind, "message": f.message, "detail": f.detail,
                             "phase": "load"})
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the judge decided and went away
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    # Stay alive until the caller kills this process tree: exiting first would orphan whatever the
    # candidate started, and an orphan outside the tree can no longer be found.
    try:
        conn.recv_bytes(16)
    except (EOFError, OSError):
        pass


def _load(spec: dict[str, Any], observer: Observer, backend: Any, ref_module: Any, init_args: list[Any],
          init_kwargs: dict[str, Any]) -> tuple[Any, bool, float]:
    t0 = time.perf_counter()
    path = spec["candidate_path"]
    try:
        module = problem.import_file(path, "candidate")
    except SyntaxError as e:
        raise Fault("syntax", short(e)) from e
    except ImportError as e:
        raise Fault("import", short(e), traceback.format_exc()[-4000:]) from e
    except Exception as e:
        kind = "triton_compile" if classify(e, path, set()) == "triton_compile" else "import"
        raise Fault(kind, short(e), traceback.format_exc()[-4000:]) from e
    observer.kernel_names |= set(observer.recorder.note_module(module))
    entry = spec["entry_point"]
    cls = getattr(module, entry + "New", None)
    aliased = False
    if cls is None and not spec["require_triton"] and isinstance(getattr(module, entry, None), type):
        cls, aliased = getattr(module, entry), True
    if not isinstance(cls, type):
        raise Fault("missing_model_new", f"the candidate defines no class {entry}New")
    try:
        model = problem.build_model(cls, init_args, init_kwargs, backend)
    except Exception as e:
        raise Fault("init", short(e), traceback.format_exc()[-4000:]) from e
    return model, aliased, time.perf_counter() - t0
