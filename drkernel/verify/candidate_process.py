"""The untrusted side of an evaluation: a sandboxed child that imports the candidate and runs it.

It never sees a reference output of a correctness seed: it sends what the candidate returned (and
the inputs as they were after the call) to the trusted child, which regenerates the inputs from the
seed and compares. After correctness it asks the parent for the device's timing slot, then times
reference and candidate interleaved, profiles coverage, and re-validates fresh outputs.

Messages to the parent: ("loaded", info) ("want_timing", summary) ("perf", stats) ("verdict", kind,
message, detail) for a candidate fault, ("reference", message) when the reference fails here,
("infra", message) for a harness fault.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import traceback
from typing import Any

import torch

from drkernel.verify import problem, tensors
from drkernel.verify.devices import Backend, env_for, make_backend
from drkernel.verify.launches import LaunchRecorder, Window
from drkernel.verify.sandbox import capture_output, descendants, isolate
from drkernel.verify.tamper import HarnessSnapshot

_TRITON_COMPILE_ERRORS = {"CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct",
                          "MLIRCompilationError", "InterpreterError"}


class CandidateFault(Exception):
    """The candidate did something that decides the verdict (not a harness problem)."""

    def __init__(self, kind: str, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.kind, self.message, self.detail = kind, message, detail


def _short(exc: BaseException, limit: int = 2000) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[:limit] + " ..."


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


class CandidateHarness:
    def __init__(self, spec: dict[str, Any], parent: Any, trusted: Any, backend: Backend) -> None:
        self.spec, self.parent, self.trusted, self.backend = spec, parent, trusted, backend
        self.opts = spec["options"]
        self.path = spec["candidate_path"]
        self.recorder = LaunchRecorder(self.path)
        self.ipc = backend.name == "cuda"
        self.kernel_names: set[str] = set(spec.get("gate_kernels", []))
        self.tampered: list[str] = []
        self.stream_mismatch: list[str] = []
        self.decoy_calls: list[str] = []
        self.side_processes: list[str] = []
        self.last_timed: tuple[int, Any, list[Any]] | None = None
        self.forward_s: list[float] = []
        self.kernel_s: list[float] = []

    # -- helpers ------------------------------------------------------------------------------
    def _forward(self, model: Any, inputs: list[Any], label: str) -> tuple[Any, Window, float]:
        """One candidate forward with launch recording and the tamper check."""
        self.recorder.begin()
        t0 = time.perf_counter()
        try:
            with torch.no_grad():
                out = model(*inputs)
            self.backend.synchronize()
        except Exception as e:
            self.recorder.end()
            kind = classify(e, self.path, self.kernel_names | self.recorder.candidate_names)
            raise CandidateFault(kind, _short(e), traceback.format_exc()[-4000:]) from e
        seconds = time.perf_counter() - t0
        window = self.recorder.end()
        self._after_call(window, label)
        return out, window, seconds

    def _after_call(self, window: Window, label: str) -> None:
        changed = self.snapshot.changed()
        if not self.recorder.hook_still_installed():
            changed.append("triton launch_enter_hook chain")
        if changed and not self.tampered:
            self.tampered = changed
        if not self.side_processes:
            # Compilers Triton runs (ptxas) have exited by now: a live descendant is work hidden from the
            # harness (this process is a subreaper, so double-forked orphans are counted too).
            self.side_processes = [f"pid {pid} alive after {label}" for pid in descendants(os.getpid())]
        if self.spec["require_triton"] and not window.candidate_launches():
            self.decoy_calls.append(label)
        harness_stream = self.backend.current_stream()
        for launch in window.candidate_launches():
            if launch.stream is not None and harness_stream is not None and launch.stream != harness_stream:
                self.stream_mismatch.append(f"{launch.name} on stream {launch.stream:#x} in {label}")

    def _send_to_trusted(self, message: tuple[Any, ...]) -> None:
        self.trusted.send(message)
        ack = self.trusted.recv()  # CUDA IPC: the tensors must stay alive until the peer has compared
        if ack != ("ack", message[1]):
            raise RuntimeError(f"trusted child answered {ack!r}")

    def _outputs(self, out: Any, inputs: list[Any]) -> tuple[list[Any], list[Any], bool]:
        flat = tensors.flatten(out)
        try:
            packed_out = tensors.pack(flat, self.ipc)
        except tensors.OutputError as e:
            raise CandidateFault("output_mismatch", str(e)) from e
        packed_in = tensors.pack(inputs, self.ipc)
        return packed_out, packed_in, tensors.aliases_any(flat, inputs)

    # -- phases -------------------------------------------------------------------------------
    def load(self) -> None:
        t0 = time.perf_counter()
        try:
            self.ref_module = problem.import_file(self.spec["reference_path"], "reference")
            init_args, init_kwargs = problem.init_inputs(self.ref_module, self.backend)
            self.ref_model = problem.build_model(getattr(self.ref_module, self.spec["entry_point"]), init_args,
                                                 init_kwargs, self.backend)
        except Exception as e:
            raise ReferenceFailure(f"reference failed to load: {_short(e)}") from e
        self.recorder.install()
        self.snapshot = HarnessSnapshot(self.recorder.guarded_objects())
        try:
            module = problem.import_file(self.path, "candidate")
        except SyntaxError as e:
            raise CandidateFault("syntax", _short(e)) from e
        except ImportError as e:
            raise CandidateFault("import", _short(e), traceback.format_exc()[-4000:]) from e
        except Exception as e:
            kind = "triton_compile" if classify(e, self.path, set()) == "triton_compile" else "import"
            raise CandidateFault(kind, _short(e), traceback.format_exc()[-4000:]) from e
        names = self.recorder.note_module(module)
        self.kernel_names |= set(names)
        entry = self.spec["entry_point"]
        cls = getattr(module, entry + "New", None)
        self.aliased_model = False
        if cls is None and not self.spec["require_triton"] and isinstance(getattr(module, entry, None), type):
            cls, self.aliased_model = getattr(module, entry), True
        if not isinstance(cls, type):
            raise CandidateFault("missing_model_new", f"the candidate defines no class {entry}New")
        try:
            self.model = problem.build_model(cls, init_args, init_kwargs, self.backend)
        except Exception as e:
            raise CandidateFault("init", _short(e), traceback.format_exc()[-4000:]) from e
        changed = self.snapshot.changed()
        if changed:
            self.tampered = changed
        self.load_s = time.perf_counter() - t0
        self.parent.send(("loaded", {"load_s": self.load_s, "kernels": sorted(self.kernel_names),
                                     "model_new_aliased_to_model": self.aliased_model,
                                     "launch_hook": self.recorder.hook_api}))

    def correctness(self) -> None:
        t0 = time.perf_counter()
        for i, seed in enumerate(self.spec["correct_seeds"]):
            inputs = problem.make_inputs(self.ref_module, seed, self.backend)
            out, window, seconds = self._forward(self.model, inputs, f"correctness trial {i}")
            self.forward_s.append(seconds)
            self.kernel_s.append(window.candidate_seconds())
            packed_out, packed_in, aliases = self._outputs(out, inputs)
            self._send_to_trusted(("trial", i, seed, packed_out, packed_in, aliases))
            del out, packed_out, packed_in
        self.correct_s = time.perf_counter() - t0

    def evidence(self) -> dict[str, Any]:
        """What the hack checks have seen so far; the caller judges it after each phase."""
        return {"tampered": self.tampered, "decoy_calls": self.decoy_calls,
                "side_processes": self.side_processes[:5], "stream_mismatch": self.stream_mismatch[:5]}

    def summary(self) -> dict[str, Any]:
        return {"correct_s": self.correct_s, "kernels": sorted(self.kernel_names), **self.evidence()}

    def timing(self) -> dict[str, Any]:
        """Interleaved timing with fresh inputs, cache flush and device-wide sync; then coverage."""
        t0 = time.perf_counter()
        warm, n = self.spec["num_warmup"], self.spec["num_perf_trials"]
        seeds = self.spec["timing_seeds"]
        ref_t: list[dict[str, float]] = []
        cand_t: list[dict[str, float]] = []
        last: tuple[int, Any, list[Any]] | None = None
        self.forward_s, self.kernel_s = [], []
        for i in range(warm + n):
            seed = seeds[i]
            inputs = problem.make_inputs(self.ref_module, seed, self.backend)
            self.backend.flush_cache()
            with torch.no_grad():
                t = self.backend.time_call(lambda: self.ref_model(*inputs))
            if i >= warm:
                ref_t.append(t)
            inputs = problem.make_inputs(self.ref_module, seed, self.backend)
            self.backend.flush_cache()
            holder: list[Any] = []
            self.recorder.begin()
            try:
                with torch.no_grad():
                    t = self.backend.time_call(lambda: holder.append(self.model(*inputs)))
            except Exception as e:
                self.recorder.end()
                kind = classify(e, self.path, self.kernel_names | self.recorder.candidate_names)
                raise CandidateFault(kind, f"during timing: {_short(e)}", traceback.format_exc()[-4000:]) from e
            window = self.recorder.end()
            self._after_call(window, f"timing call {i}")
            if i >= warm:
                cand_t.append(t)
                self.forward_s.append(t["wall_ms"] / 1e3)
                self.kernel_s.append(window.candidate_seconds())
            last = (seed, holder[0], inputs)
        med = lambda xs, k: statistics.median(x[k] for x in xs)  # noqa: E731
        stats: dict[str, Any] = {
            "timing_s": time.perf_counter() - t0,
            "ref_ms": med(ref_t, "ms"), "cand_ms": med(cand_t, "ms"),
            "ref_stream_ms": med(ref_t, "stream_ms"), "cand_stream_ms": med(cand_t, "stream_ms"),
            "ref_wall_ms": med(ref_t, "wall_ms"), "cand_wall_ms": med(cand_t, "wall_ms"),
            "trials": n, "warmup": warm,
        }
        self.last_timed = last
        return stats

    def coverage(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        if self.backend.name == "cpu":
            total = sum(self.forward_s)
            value = min(1.0, sum(self.kernel_s) / total) if total > 0 else None
            return {"coverage": value, "coverage_source": "cpu_wall", "coverage_s": time.perf_counter() - t0}
        sets = [problem.make_inputs(self.ref_module, s, self.backend) for s in self.spec["timing_seeds"][:3]]

        def run() -> None:
            with torch.no_grad():
                for inputs in sets:
                    self.model(*inputs)

        kernels, setup_s = self.backend.kernel_times(run)
        names = self.kernel_names | self.recorder.candidate_names
        total = sum(d for _, d in kernels)
        mine = sum(d for name, d in kernels if name in names)
        return {"coverage": (mine / total) if total > 0 else None, "coverage_source": self.backend.coverage_source,
                "profiler_setup_s": setup_s, "profiler_kernel_ms_per_call": total / 1e3 / len(sets),
                "profiler_kernels": len(kernels), "coverage_s": time.perf_counter() - t0}

    def revalidate(self) -> None:
        """After timing: the last timed output, a fresh seed, the first seed again, and new values written
        into storage the candidate has already seen. Each is judged as soon as it exists, so at most one
        extra input/output set is alive at a time (big problems take gigabytes per set)."""
        if self.last_timed is not None:
            seed, out, inputs = self.last_timed
            self.last_timed = None
            self._judge_reval("last_timed_call", seed, out, inputs)
            del out, inputs
        for tag, seed in (("fresh_seed", self.spec["reval_seeds"][0]), ("first_seed_again", self.spec["correct_seeds"][0])):
            inputs = problem.make_inputs(self.ref_module, seed, self.backend)
            out, _, _ = self._forward(self.model, inputs, f"re-validation {tag}")
            self._judge_reval(tag, seed, out, inputs)
            del out, inputs
        # Same storage, new values: a cache keyed on data_ptr/shape replays the old output here.
        inputs = problem.make_inputs(self.ref_module, self.spec["correct_seeds"][0], self.backend)
        self._forward(self.model, inputs, "re-validation same_storage (first call)")
        seed = self.spec["reval_seeds"][1]
        for old, new in zip(inputs, problem.make_inputs(self.ref_module, seed, self.backend)):
            if isinstance(old, torch.Tensor):
                old.copy_(new)
        out, _, _ = self._forward(self.model, inputs, "re-validation same_storage_new_values")
        self._judge_reval("same_storage_new_values", seed, out, inputs)

    def _judge_reval(self, tag: str, seed: int, out: Any, inputs: list[Any]) -> None:
        packed_out, packed_in, aliases = self._outputs(out, inputs)
        self._send_to_trusted(("reval", tag, seed, packed_out, packed_in, aliases))


class ReferenceFailure(Exception):
    """The reference problem itself does not load or run: no verdict is possible."""


def main(spec: dict[str, Any], parent: Any, trusted: Any) -> None:
    """Entry point of the candidate child (a fork of the warm fork-server)."""
    try:
        layers = isolate(spec["workdir"], on_accelerator=spec["device"] != "cpu",
                         memory_limit_mb=spec["memory_limit_mb"], env=env_for(spec["device"]))
        capture_output(spec["workdir"])
        parent.send(("isolation", layers))
        backend = make_backend(spec["device"])
    except Exception as e:
        parent.send(("infra", f"candidate sandbox setup failed: {_short(e)}"))
        return
    harness = CandidateHarness(spec, parent, trusted, backend)
    try:
        harness.load()
        harness.correctness()
        parent.send(("want_timing", harness.summary()))
        order = parent.recv()
        if order == "go":
            stats: dict[str, Any] = {}
            if spec["measure_performance"]:
                stats.update(harness.timing())
            if spec["measure_coverage"]:
                stats.update(harness.coverage())
            t_reval = time.perf_counter()
            harness.revalidate()
            stats["revalidation_s"] = time.perf_counter() - t_reval
            stats.update(harness.evidence())
            parent.send(("perf", stats))
    except CandidateFault as f:
        parent.send(("verdict", f.kind, f.message, f.detail))
    except ReferenceFailure as e:
        parent.send(("reference", str(e)))
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the parent decided and went away
    except Exception as e:
        parent.send(("infra", f"candidate harness failed: {_short(e)}\n{traceback.format_exc()[-3000:]}"))
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    # Stay alive until the caller kills this process tree: exiting first would orphan whatever the
    # candidate started, and an orphan outside the tree can no longer be found.
    try:
        parent.recv()
    except (EOFError, OSError):
        pass
