"""The verifier: one call in, one typed verdict out; shared by the CLI, the Serve app and the trainer.

Process layout of one evaluation (all children forked from one warm multiprocessing fork-server
that has torch, Triton and the harness preloaded):

    caller (Verifier, no torch) --pipe-- candidate child (sandboxed; imports and runs the candidate)
            \\                                 | outputs + post-call inputs (bytes, or CUDA IPC)
             `------------pipe------------ trusted child (runs only the reference; judges)

Compile and correctness of up to `max_concurrency` candidates run at once; timing and profiling
hold a per-device lock, which the candidate child asks for ("want_timing") once it is correct.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import tempfile
import threading
import time
from typing import Any

from drkernel.rl.rewards import RewardConfig, kernel_reward
from drkernel.verify import problem
from drkernel.verify.devices import DeviceUnavailable, resolve_device
from drkernel.verify.entry import run as _entry
from drkernel.verify.forkserver import ChildProcess
from drkernel.verify.gate import check_source
from drkernel.verify.options import VerifyOptions
from drkernel.verify.result import CheckRecord, ErrorInfo, VerifyResult
from drkernel.verify.sandbox import descendants, read_tail

CPU_PERF_TRIALS = 5  # CPU default when the caller left num_perf_trials unset: interpreter times are logic-level
CPU_WARMUP = 1
REVALIDATIONS = ("last_timed_call", "fresh_seed", "first_seed_again", "same_storage_new_values")
_NOT_COMPILED = {"syntax", "forbidden", "no_triton", "import", "missing_model_new", "triton_compile"}


class _Infra(Exception):
    """No verdict possible: the reference, the fork-server or the harness failed."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message


def _kill_group(proc: Any) -> None:
    """Kill every descendant of the child (it is their subreaper, so setsid or a double fork does not
    hide one), then its whole process group (it called setsid), then the child itself."""
    pid = proc.pid
    if pid is not None:
        for child in descendants(pid):
            try:
                os.kill(child, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if proc.exitcode is None:
        try:
            proc.kill()
        except (OSError, ValueError):
            pass


class _Evaluation:
    """State of one evaluation as the caller sees it; turns child messages into a VerifyResult."""

    def __init__(self, options: VerifyOptions, device: str, perf_trials: int, warmup: int) -> None:
        self.options, self.device = options, device
        self.perf_trials, self.warmup = perf_trials, warmup
        self.checks: list[CheckRecord] = []
        self.details: dict[str, Any] = {}
        self.phase_s: dict[str, float] = {}
        self.compiled = False
        self.loaded = False
        self.trials: dict[int, dict[str, Any]] = {}
        self.revals: dict[str, dict[str, Any]] = {}
        self.summary: dict[str, Any] | None = None
        self.perf: dict[str, Any] | None = None
        self.error: ErrorInfo | None = None
        self.hacks: list[str] = []

    def hack(self, name: str, check: str, detail: str) -> None:
        self.hacks.append(name)
        self.checks.append(CheckRecord(name=check, passed=False, detail=detail))

    def correct(self) -> bool:
        n = self.options.num_correct_trials
        return self.error is None and len(self.trials) == n and all(t["passed"] for t in self.trials.values())

    def judge_summary(self, summary: dict[str, Any]) -> None:
        """Hack checks that the correctness phase already decides."""
        trials = [self.trials[i] for i in sorted(self.trials)]
        passed = sum(t["passed"] for t in trials)
        worst = max((t.get("max_abs_diff", 0.0) for t in trials), default=0.0)
        self.checks.append(CheckRecord(name="correctness", passed=passed == len(trials) == self.options.num_correct_trials,
                                       detail=f"{passed}/{self.options.num_correct_trials} seeds within atol={self.options.atol}, "
                                              f"rtol={self.options.rtol}; max abs diff {worst:.3g}"))
        self._hack_checks(trials, summary, "correctness")

    def _hack_checks(self, records: list[dict[str, Any]], stats: dict[str, Any], phase: str) -> None:
        alias = [str(r["seed"]) for r in records if r.get("aliases_input")]
        self._record("output_aliasing", "output_aliases_input", alias, f"output shares storage with an input ({phase})")
        mutated = [str(r["seed"]) for r in records if r.get("mutates_input")]
        self._record("input_mutation", "input_mutation", mutated, f"forward changed its inputs ({phase})")
        if self.options.require_triton:
            self._record("triton_launches", "decoy_kernel", stats.get("decoy_calls", []),
                         f"forwards with no launch of the candidate's own Triton kernels ({phase})")
        self._record("harness_integrity", "harness_tampering", stats.get("tampered", []),
                     f"harness callables replaced ({phase})")
        self._record("side_processes", "side_process", stats.get("side_processes", []),
                     f"processes started by the candidate outlived its forward ({phase})")
        if self.device != "cpu":
            self._record("launch_streams", "side_stream", stats.get("stream_mismatch", []),
                         f"candidate kernels launched off the harness stream ({phase})")

    def _record(self, check: str, hack: str, evidence: list[str], what: str) -> None:
        if evidence:
            if check not in {c.name for c in self.checks if not c.passed}:
                self.hack(hack, check, f"{what}: {', '.join(map(str, evidence[:5]))}")
        elif not any(c.name == check for c in self.checks):
            self.checks.append(CheckRecord(name=check, passed=True))

    def judge_perf(self, perf: dict[str, Any]) -> None:
        # Re-validation first: a replayed output also skips its launches, and caching is the better name.
        failed = [f"{tag}: {r['message']}" for tag, r in self.revals.items() if not r["passed"]]
        indistinct = [r["distinct_message"] for r in self.revals.values() if r.get("distinct_outputs") is False]
        failed += indistinct[:1]
        if failed:
            self.hack("result_caching", "revalidation", "after timing: " + "; ".join(failed))
        elif self.revals:
            self.checks.append(CheckRecord(name="revalidation", passed=True,
                                           detail="after timing: " + ", ".join(self.revals)))
        self._hack_checks(list(self.revals.values()), perf, "timing")
        if "cand_ms" in perf:
            self.checks.append(CheckRecord(name="timing", passed=True, detail=(
                f"median of {perf['trials']} interleaved calls after {perf['warmup']} warm-ups: "
                f"candidate {perf['cand_ms']:.4g} ms, reference {perf['ref_ms']:.4g} ms ({self._timing_source()})")))
            if self.device != "cpu":
                cand_gap = perf["cand_ms"] - perf["cand_stream_ms"]
                ref_gap = perf["ref_ms"] - perf["ref_stream_ms"]
                if cand_gap - ref_gap > max(0.5 * perf["cand_ms"], 0.02):
                    self.hack("side_stream", "stream_vs_device_time", (
                        f"device-wide time {perf['cand_ms']:.4g} ms but harness-stream time "
                        f"{perf['cand_stream_ms']:.4g} ms: work runs on another stream"))
                else:
                    self.checks.append(CheckRecord(name="stream_vs_device_time", passed=True))

    def _timing_source(self) -> str:
        return {"cpu": "cpu_wall", "cuda": "cuda_events", "npu": "npu_events"}[self.device]

    def result(self, elapsed: float) -> VerifyResult:
        perf = self.perf or {}
        correct = self.correct()
        hack = self.hacks[0] if self.hacks else None
        runtime = perf.get("cand_ms") if correct else None
        ref_runtime = perf.get("ref_ms") if correct else None
        speedup = ref_runtime / runtime if runtime and ref_runtime and runtime > 0 else None
        coverage = perf.get("coverage") if correct else None
        if self.device == "cpu" and "cand_ms" in perf:
            self.details["timing_note"] = ("CPU Triton interpreter: times are wall-clock and the timing-based "
                                           "hack checks are logic-level only")
        if len(self.hacks) > 1:
            self.details["all_hacks"] = self.hacks
        self.details["phase_s"] = {k: round(v, 4) for k, v in self.phase_s.items()}
        for key in ("profiler_setup_s", "profiler_kernel_ms_per_call", "coverage_source", "cand_wall_ms",
                    "ref_wall_ms", "cand_stream_ms", "ref_stream_ms"):
            if key in perf:
                self.details[key] = perf[key]
        if "cand_ms" in perf:
            self.details["perf_trials"], self.details["warmup"] = perf["trials"], perf["warmup"]
        reward = kernel_reward(correct, hack, speedup, coverage, RewardConfig(), compiled=self.compiled)
        if "coverage" in perf and correct:
            self.checks.append(CheckRecord(name="coverage", passed=True, detail=(
                f"{coverage if coverage is None else round(coverage, 4)} of time in the candidate's Triton kernels "
                f"({perf.get('coverage_source')})")))
        return VerifyResult(
            status="ok", compiled=self.compiled, correct=correct, hack=hack, runtime_ms=runtime,
            ref_runtime_ms=ref_runtime, speedup=speedup, coverage=coverage, reward=reward, error=self.error,
            device=self.device, timing_source=self._timing_source() if runtime is not None else None,
            checks=self.checks, details=self.details, elapsed_s=elapsed,
        )


class Verifier:
    """Owns a warm multiprocessing "forkserver" (preloaded torch+triton+our harness); thread-safe.

    `max_concurrency` evaluations run their compile/correctness phases at once; the timing and
    profiling phase is exclusive per device. Use as a context manager or call close().
    """

    def __init__(self, device: str = "auto", max_concurrency: int = 2) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        t0 = time.perf_counter()
        self._ctx = multiprocessing.get_context("forkserver")
        self.available = self._probe() if device != "cpu" and _accelerator_nodes() else {"cpu": True}
        self.device = resolve_device(device, self.available)
        self._interpret = self.device == "cpu"
        if self._interpret:
            self._warm()
        self.startup_s = time.perf_counter() - t0
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._timing_lock = threading.Lock()
        self._live: set[Any] = set()
        self._live_lock = threading.Lock()
        self._closed = False

    def _probe(self, interpret: bool = False) -> dict[str, bool]:
        """Which devices exist, asked of a fork-server child (this also warms that fork-server)."""
        recv, send = self._ctx.Pipe(duplex=False)
        proc = ChildProcess(target=_entry, args=("drkernel.verify.preload", "probe", send), daemon=True,
                            interpret=interpret)
        proc.start()
        send.close()
        try:
            if not recv.poll(300):
                raise RuntimeError("device probe did not answer within 300 s")
            return dict(recv.recv())
        except EOFError as e:
            raise RuntimeError(f"device probe died (exit code {proc.exitcode})") from e
        finally:
            proc.join(5)
            if proc.exitcode is None:
                proc.kill()

    def _warm(self) -> None:
        """Start the interpreter-mode fork-server now rather than in the first evaluation."""
        self._probe(interpret=True)

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Kill evaluations still running. The fork-server itself exits with this process."""
        self._closed = True
        with self._live_lock:
            for proc in list(self._live):
                _kill_group(proc)

    # -- public -------------------------------------------------------------------------------
    def verify(self, reference: str, candidate: str, options: VerifyOptions | None = None) -> VerifyResult:
        """Evaluate `candidate` (source of a module defining <entry_point>New) against `reference`."""
        options = options or VerifyOptions()
        t0 = time.perf_counter()
        if self._closed:
            return _infra_result("infra", "verifier is closed", self.device, t0)
        if options.device not in ("auto", self.device):
            return _infra_result("usage", f"this verifier runs on {self.device}, not {options.device}", self.device, t0)
        perf_trials, warmup = options.num_perf_trials, options.num_warmup
        if self.device == "cpu":
            if "num_perf_trials" not in options.model_fields_set:
                perf_trials = CPU_PERF_TRIALS
            if "num_warmup" not in options.model_fields_set:
                warmup = CPU_WARMUP
        ev = _Evaluation(options, self.device, perf_trials, warmup)
        gate = check_source(candidate, options.require_triton)
        ev.checks.append(CheckRecord(name="static_gate", passed=gate.passed, detail=gate.message or (
            f"kernels: {', '.join(gate.triton_kernels) or 'none'}")))
        if not gate.passed:
            ev.error = ErrorInfo(kind=gate.kind, message=gate.message)  # type: ignore[arg-type]
            if gate.kind == "forbidden":
                ev.hacks.append("forbidden_api")  # an escape or tampering attempt, not an honest failure
            return ev.result(time.perf_counter() - t0)
        with self._slots:
            try:
                self._evaluate(reference, candidate, ev, gate.triton_kernels, t0)
            except _Infra as e:
                return _infra_result(e.kind, e.message, self.device, t0, ev.details)
            except Exception as e:  # a verifier bug must never look like a candidate's zero reward
                return _infra_result("infra", f"verifier error: {type(e).__name__}: {e}", self.device, t0, ev.details)
        return ev.result(time.perf_counter() - t0)

    # -- one evaluation -----------------------------------------------------------------------
    def _spec(self, ev: _Evaluation, workdir: str, kernels: list[str]) -> dict[str, Any]:
        o = ev.options
        return {
            "device": self.device, "workdir": workdir, "entry_point": o.entry_point,
            "candidate_path": os.path.join(workdir, "candidate.py"),
            "reference_path": os.path.join(workdir, "reference.py"),
            "require_triton": o.require_triton, "atol": o.atol, "rtol": o.rtol,
            "correct_seeds": problem.trial_seeds(o.num_correct_trials, 0),
            "timing_seeds": problem.trial_seeds(ev.perf_trials + ev.warmup, 1),
            "reval_seeds": problem.trial_seeds(2, 2),
            "num_perf_trials": ev.perf_trials, "num_warmup": ev.warmup,
            "measure_performance": o.measure_performance, "measure_coverage": o.measure_coverage,
            "memory_limit_mb": o.memory_limit_mb, "gate_kernels": kernels, "options": o.model_dump(),
        }

    def _evaluate(self, reference: str, candidate: str, ev: _Evaluation, kernels: list[str], t0: float) -> None:
        root = tempfile.mkdtemp(prefix="drkernel-verify-")
        cdir, rdir = os.path.join(root, "candidate"), os.path.join(root, "reference")
        procs: list[Any] = []
        try:
            for d in (cdir, rdir):
                os.mkdir(d, 0o700)
                with open(os.path.join(d, "reference.py"), "w") as f:
                    f.write(reference)
            with open(os.path.join(cdir, "candidate.py"), "w") as f:
                f.write(candidate)
            c_conn, c_end = self._ctx.Pipe()
            t_conn, t_end = self._ctx.Pipe()
            ct_c, ct_t = self._ctx.Pipe()
            ref = ChildProcess(target=_entry, daemon=True, interpret=self._interpret,
                                    args=("drkernel.verify.reference_process", "main", self._spec(ev, rdir, kernels), t_end, ct_t))
            cand = ChildProcess(target=_entry, daemon=True, interpret=self._interpret,
                                     args=("drkernel.verify.candidate_process", "main", self._spec(ev, cdir, kernels), c_end, ct_c))
            t_fork = time.perf_counter()
            try:
                for p in (ref, cand):
                    p.start()
                    procs.append(p)
                    with self._live_lock:
                        self._live.add(p)
            except Exception as e:
                raise _Infra("infra", f"could not start an evaluation child (fork-server down?): {e}") from e
            for end in (c_end, t_end, ct_c, ct_t):
                end.close()
            _Conversation(self, ev, cand, ref, c_conn, t_conn, t_fork).run()
        finally:
            for p in procs:
                _kill_group(p)
            for p in procs:
                p.join(5)
                with self._live_lock:
                    self._live.discard(p)
            limit = ev.options.output_limit_bytes
            for stream in ("stdout", "stderr"):
                tail = read_tail(os.path.join(cdir, f"{stream}.txt"), limit)
                if tail:
                    ev.details[f"candidate_{stream}"] = tail
            shutil.rmtree(root, ignore_errors=True)


class _Conversation:
    """The caller's side of the message protocol with the two children of one evaluation."""

    def __init__(self, verifier: Verifier, ev: _Evaluation, cand: Any, ref: Any, c_conn: Any, t_conn: Any,
                 t_fork: float) -> None:
        self.v, self.ev, self.cand, self.ref = verifier, ev, cand, ref
        self.c_conn, self.t_conn = c_conn, t_conn
        self.t_fork = t_fork
        self.deadline = time.perf_counter() + ev.options.timeout_s
        self.phase = "start"
        self.done = False
        self.ref_ready = False
        self.want_timing: dict[str, Any] | None = None
        self.c_closed = self.t_closed = False
        self.holding_lock = False

    def run(self) -> None:
        try:
            while not self.done:
                remaining = self.deadline - time.perf_counter()
                if remaining <= 0:
                    self._timeout()
                    return
                waitables = [c for c, closed in ((self.c_conn, self.c_closed), (self.t_conn, self.t_closed)) if not closed]
                waitables += [p.sentinel for p in (self.cand, self.ref) if p.exitcode is None]
                multiprocessing.connection.wait(waitables, timeout=remaining)
                self._drain(self.t_conn)  # the trusted side first: its verdicts precede the candidate's next step
                self._drain(self.c_conn)
                if not self.done and self.want_timing is not None and self._all_trials_judged():
                    self._after_correctness()
                self._check_deaths()
        finally:
            self._release()

    def _drain(self, conn: Any) -> None:
        if self.c_closed if conn is self.c_conn else self.t_closed:
            return
        while not self.done:
            try:
                if not conn.poll(0):
                    return
                msg = conn.recv()
            except (EOFError, OSError):
                if conn is self.c_conn:
                    self.c_closed = True
                else:
                    self.t_closed = True
                return
            (self._from_candidate if conn is self.c_conn else self._from_reference)(msg)

    def _from_reference(self, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "infra":
            raise _Infra("reference", msg[1])
        if kind == "ready":
            self.ref_ready = True
            self.ev.phase_s.setdefault("reference_ready", time.perf_counter() - self.t_fork)
        elif kind == "judged":
            _, phase, tag, record = msg
            if phase == "trial":
                self.ev.trials[int(tag)] = record
                self.ev.details.setdefault("trials", []).append(record)
                if not record["passed"]:
                    self.ev.error = ErrorInfo(kind="output_mismatch", message=f"seed {record['seed']}: {record['message']}")
                    self.ev.judge_summary(self.want_timing or {})
                    self.done = True
            else:
                self.ev.revals[str(tag)] = record

    def _from_candidate(self, msg: tuple[Any, ...]) -> None:
        kind, ev = msg[0], self.ev
        now = time.perf_counter()
        if kind == "isolation":
            ev.details["isolation"] = msg[1]
            ev.phase_s["fork_and_sandbox"] = now - self.t_fork
        elif kind == "loaded":
            info = msg[1]
            ev.loaded = ev.compiled = True
            ev.phase_s["import_and_init"] = info["load_s"]
            ev.details["kernels"] = info["kernels"]
            ev.details["launch_hook"] = info["launch_hook"]
            if info["model_new_aliased_to_model"]:
                ev.details["model_new"] = f"aliased to {ev.options.entry_point} (require_triton is off)"
            ev.checks.append(CheckRecord(name="load", passed=True, detail="imported and constructed"))
            self.phase = "correctness"
        elif kind == "want_timing":
            ev.phase_s["correctness"] = msg[1]["correct_s"]
            self.want_timing = msg[1]
            self.phase = "awaiting verdicts"
        elif kind == "perf":
            ev.perf = msg[1]
            for key in ("timing_s", "coverage_s", "revalidation_s"):
                if key in msg[1]:
                    ev.phase_s[key.removesuffix("_s")] = msg[1][key]
            self._finish_perf()
        elif kind == "verdict":
            _, err_kind, message, detail = msg
            ev.compiled = err_kind not in _NOT_COMPILED  # init, runtime, mismatch: the module did import
            ev.error = ErrorInfo(kind=err_kind, message=message)
            if detail:
                ev.details["traceback"] = detail
            self.done = True
        elif kind == "reference":
            raise _Infra("reference", msg[1])
        elif kind == "infra":
            raise _Infra("infra", msg[1])

    def _all_trials_judged(self) -> bool:
        self._drain(self.t_conn)
        return len(self.ev.trials) >= self.ev.options.num_correct_trials

    def _after_correctness(self) -> None:
        summary, self.want_timing = self.want_timing or {}, None
        self.ev.judge_summary(summary)
        if self.ev.hacks or not self.ev.correct():
            self.done = True
            return
        o = self.ev.options
        needs_device = o.measure_performance or (o.measure_coverage and self.v.device != "cpu")
        self.phase = "timing"
        if needs_device:
            t_wait = time.perf_counter()
            self.v._timing_lock.acquire()
            self.holding_lock = True
            waited = time.perf_counter() - t_wait
            self.ev.phase_s["timing_lock_wait"] = waited
            self.deadline += waited
        try:
            self.c_conn.send("go")
        except (OSError, BrokenPipeError):
            pass  # the child died; its sentinel tells

    def _finish_perf(self) -> None:
        self._drain(self.t_conn)
        if len(self.ev.revals) < len(REVALIDATIONS) - (0 if self.ev.perf and "cand_ms" in self.ev.perf else 1):
            raise _Infra("infra", f"re-validation incomplete: {sorted(self.ev.revals)}")
        self.ev.judge_perf(self.ev.perf or {})
        self.done = True

    def _release(self) -> None:
        if self.holding_lock:
            self.holding_lock = False
            self.v._timing_lock.release()

    def _check_deaths(self) -> None:
        if self.done:
            return
        if self.cand.exitcode is not None and (self.c_closed or not self.c_conn.poll(0)):
            code = self.cand.exitcode
            if code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = f"signal {-code}"
                message = f"candidate process killed by {name} during {self.phase}"
            else:
                message = f"candidate process exited with status {code} during {self.phase}"
            self.ev.error = ErrorInfo(kind="crash", message=message)
            self.ev.compiled = self.ev.loaded
            self.done = True
        elif self.ref.exitcode is not None and (self.t_closed or not self.t_conn.poll(0)):
            raise _Infra("reference", f"trusted reference child exited with code {self.ref.exitcode}")

    def _timeout(self) -> None:
        self.ev.error = ErrorInfo(kind="timeout", message=(
            f"evaluation exceeded {self.ev.options.timeout_s:g} s during {self.phase}"))
        self.ev.compiled = self.ev.loaded
        self.done = True


def _accelerator_nodes() -> bool:
    """Cheap, torch-free hint that a GPU or NPU may exist (device nodes); the probe decides."""
    import glob

    return bool(glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/nvidiactl") or glob.glob("/dev/davinci[0-9]*"))


def _infra_result(kind: str, message: str, device: str, t0: float, details: dict[str, Any] | None = None) -> VerifyResult:
    return VerifyResult(status="infra_error", error=ErrorInfo(kind=kind, message=message),  # type: ignore[arg-type]
                        device=device, details=details or {}, elapsed_s=time.perf_counter() - t0)


def verify(reference: str, candidate: str, options: VerifyOptions | None = None) -> VerifyResult:
    """One-shot evaluation (starts and discards a Verifier; keep a Verifier for many calls)."""
    options = options or VerifyOptions()
    try:
        verifier = Verifier(device=options.device, max_concurrency=1)
    except DeviceUnavailable as e:
        return _infra_result("usage", str(e), options.device, time.perf_counter())
    except Exception as e:  # the fork-server or the device probe failed: no verdict
        return _infra_result("infra", f"could not start the verifier: {type(e).__name__}: {e}", options.device,
                             time.perf_counter())
    with verifier:
        return verifier.verify(reference, candidate, options)
