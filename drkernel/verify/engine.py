"""The verifier: one call in, one typed verdict out; shared by the CLI, the Serve app and the trainer.

Process layout of one evaluation (all children forked from one warm multiprocessing fork-server
that has torch, Triton and the harness preloaded; this process never imports torch):

    caller (Verifier) --JSON-- judge (trusted: makes inputs, times, compares; runs no model code)
                                 |-- reference runner (clean fork: only the reference model)
                                 `-- candidate runner (sandboxed: imports and runs the candidate)

Spares (issue 26): the children of the next evaluations are forked ahead of need, each in its own empty
private folder, sandboxed and with its device initialised but with no reference or candidate code loaded
(drkernel.verify.process.spare); an evaluation takes a ready group, writes the sources and hands each child its
ChildSpec. Every process still serves exactly one evaluation and is killed with it, so the reference never
shares a process with candidate code, no two candidates share a process, and the judge draws fresh secret
seeds per evaluation; a spare whose folders changed while it waited is discarded, not used.

This module keeps the spare groups, the timeout and the per-device timing lock; drkernel.verify.process.group
starts and reaps one evaluation's children, drkernel.verify.process.protocol defines every message a child
writes, drkernel.verify.judging.judge does the judging. The caller reads only the judge's JSON; nothing any
child sends is unpickled. Compile and correctness of up to `max_concurrency` candidates run at once; timing and
coverage hold a per-device lock, which the judge asks for ("want_timing") once the candidate is correct and gives
back ("timing_done") before re-validation, which only compares.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from drkernel.config.verifier import VerifyOptions
from drkernel.devices import DeviceUnavailable, resolve_device
from drkernel.types.verify_result import VerifyResult
from drkernel.verify.process.child_spec import child_spec
from drkernel.verify.process.entry import run as _entry
from drkernel.verify.process.forkserver import PACKAGE_ROOT, ChildProcess
from drkernel.verify.process.group import Group, kill_group
from drkernel.verify.process.sandbox import descendants, read_tail
from drkernel.verify.result import Infra
from drkernel.verify.static.gate import check_source
from drkernel.verify.verdict import Verdict

MAX_JUDGE_MESSAGE = 16 << 20
DEFAULT_SPARES = {"cuda": 2}  # spare groups per device when the caller does not say (see Verifier.__init__)
MEMORY_SHARE = 0.85  # of an accelerator's memory that concurrent evaluations' estimates may add up to


def default_spares(device: str) -> int:
    """Spare groups when the caller does not say: DEFAULT_SPARES, and none unless this process is root. Only root's
    children drop to an evaluation's own uid; without that every candidate runs as the caller, and an idle spare's
    folders (its judge's Triton cache among them, which Group.untouched lets through) are open to it."""
    return DEFAULT_SPARES.get(device, 0) if os.geteuid() == 0 else 0


class PreloadFailed(RuntimeError):
    """The fork-server did not import drkernel.verify.process.preload: children would import torch after the
    harness snapshot and honest kernels would read as harness tampering."""


class Verifier:
    """Owns a warm multiprocessing "forkserver" (preloaded torch+triton+our harness); thread-safe.

    `max_concurrency` evaluations run their compile/correctness phases at once; the timing and
    profiling phase is exclusive per device. On an accelerator, an evaluation that ran out of device
    memory beside others is judged again alone (details.oom_retry). Use as a context manager or call close().
    Raises PreloadFailed at start when the fork-server could not preload the harness.
    """

    def __init__(self, device: str = "auto", max_concurrency: int = 2, spares: int | None = None) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        if spares is not None and spares < 0:
            raise ValueError("spares must be >= 0")
        self._pools: dict[tuple[bool, int], list[Group]] = {}  # spares per (cpu_model, memory limit)
        self._pool_lock = threading.Lock()
        self._filling = False
        t0 = time.perf_counter()
        self._ctx = multiprocessing.get_context("forkserver")
        self.server_info: dict[str, Any] = {}
        self.device_memory: dict[str, int] = {}
        self.available = self._probe() if device != "cpu" and _accelerator_nodes() else {"cpu": True}
        self.device = resolve_device(device, self.available)
        # Evaluation groups started ahead of need (0: each evaluation starts its own children). By default on CUDA
        # only: the H200 measured 1.85-2.03x the evaluations per second one at a time with them, and there every
        # evaluation's children run as that evaluation's own uid, so a candidate cannot reach an idle spare. On the
        # 2-core CPU box they measured slower (their forks compete with the running evaluation); NPU: unmeasured.
        # BENCHMARKS.md, issue 26.
        self.spares = spares if spares is not None else default_spares(self.device)
        # Evaluations ask for an estimate of the device memory they will hold before they stage inputs; the
        # estimates granted at once stay within this share of the device (one that needs more runs alone).
        self._memory = _DeviceMemory(int(MEMORY_SHARE * self.device_memory.get(self.device, 0)))
        self._interpret = self.device == "cpu"
        if self._interpret:
            self._probe(interpret=True)  # start the interpreter-mode fork-server now, not in the first evaluation
        self.startup_s = time.perf_counter() - t0
        self._admission = _Admission(max_concurrency)
        self._timing_lock = threading.Lock()
        self._live: set[Any] = set()
        self._reapers: set[threading.Thread] = set()  # background removal of finished evaluations' groups
        self._live_lock = threading.Lock()
        self._closed = False

    def _probe(self, interpret: bool = False) -> dict[str, bool]:
        """Which devices exist, asked of a fork-server child (this also warms that fork-server), and
        whether the fork-server really preloaded the harness (loud if not)."""
        recv, send = self._ctx.Pipe(duplex=False)
        proc = ChildProcess(
            target=_entry, args=("drkernel.verify.process.preload", "probe", send), daemon=True, interpret=interpret
        )
        proc.start()
        send.close()
        try:
            if not recv.poll(300):
                raise RuntimeError("device probe did not answer within 300 s")
            info = json.loads(recv.recv_bytes(65536))
        except EOFError as e:
            raise RuntimeError(f"device probe died (exit code {proc.exitcode})") from e
        finally:
            proc.join(5)
            if proc.exitcode is None:
                proc.kill()
        self.server_info = {
            "preloaded": bool(info.get("preloaded")),
            "package_root": PACKAGE_ROOT,
            "interpret": interpret,
        }
        self.device_memory = {str(k): int(v) for k, v in info.get("memory", {}).items()}
        if not info.get("preloaded"):
            raise PreloadFailed(
                "the verifier's fork-server could not import drkernel.verify.process.preload "
                "(torch, Triton and the harness); "
                f"it was started with {PACKAGE_ROOT} on PYTHONPATH. Check that torch and triton import in a fresh "
                "`python -c 'import drkernel.verify.process.preload'` with that PYTHONPATH."
            )
        if bool(info.get("triton_interpret")) != interpret:
            raise PreloadFailed(
                f"the verifier's {'interpreter' if interpret else 'compiler'}-mode fork-server imported Triton with "
                f"TRITON_INTERPRET={'1' if info.get('triton_interpret') else 'unset'}: its kernels would run in the "
                "wrong mode"
            )
        return {str(k): bool(v) for k, v in info.get("devices", {}).items()}

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Kill evaluations still running and the spares. The fork-server itself exits with this process."""
        self._closed = True
        with self._pool_lock:
            spares = [g for pool in self._pools.values() for g in pool]
            self._pools.clear()
        for group in spares:
            self._discard(group)
        with self._live_lock:
            for proc in list(self._live):
                kill_group(proc)
            reapers = list(self._reapers)
        for reaper in reapers:  # finished evaluations' groups: joined and their folders removed before close returns
            reaper.join(30)

    # -- public -------------------------------------------------------------------------------
    def verify(self, reference: str, candidate: str, options: VerifyOptions | None = None) -> VerifyResult:
        """Evaluate `candidate` (source of a module defining <entry_point>New) against `reference`."""
        return self._verify(reference, candidate, options or VerifyOptions(), gate=True)

    def _verify_ungated(self, reference: str, candidate: str, options: VerifyOptions) -> VerifyResult:
        """Tests only: skip the static gate, so each runtime layer is shown to hold on its own."""
        return self._verify(reference, candidate, options, gate=False)

    def _verify(self, reference: str, candidate: str, options: VerifyOptions, gate: bool) -> VerifyResult:
        t0 = time.perf_counter()
        if self._closed:
            return VerifyResult.infra("infra", "verifier is closed", self.device, time.perf_counter() - t0)
        refusal = options.device_refusal(self.device)
        if refusal:
            return VerifyResult.infra("usage", refusal, self.device, time.perf_counter() - t0)
        v = Verdict(device=self.device)
        kernels: list[str] = []
        if gate:
            result = check_source(candidate, options.require_triton)
            v.check(
                "static_gate", result.passed, result.message or f"kernels: {', '.join(result.triton_kernels) or 'none'}"
            )
            if not result.passed:
                v.fail(str(result.kind), result.message)
                if result.kind == "forbidden":
                    v.hacks.append("forbidden_api")  # an escape or tampering attempt, not an honest failure
                return v.result(t0)
            kernels = list(result.triton_kernels)
        else:
            v.check("static_gate", True, "bypassed (test-only entry point)")
        with self._admission.shared() as slot:
            result = self._guarded(reference, candidate, options, Verdict.from_json(v.as_json()), kernels, t0)
        if self.device != "cpu" and (_out_of_memory(result) or (slot.shared and _candidate_out_of_memory(result))):
            # Device memory is shared by the evaluations running at once: when the judge or the reference ran
            # out of it, or the candidate did while others ran beside it, the evaluation is judged again with the
            # device to itself, and only that verdict counts. A candidate that runs out alone (under its own cap,
            # candidate_process.CANDIDATE_MEMORY_SHARE) is a candidate fault, reward 0: running out on purpose
            # neither masks a wrong kernel nor, alone, buys a re-run.
            with self._admission.exclusive():
                result = self._guarded(reference, candidate, options, Verdict.from_json(v.as_json()), kernels, t0)
            result.details["oom_retry"] = "ran out of device memory beside other evaluations; judged again alone"
        return result

    def _guarded(
        self, reference: str, candidate: str, options: VerifyOptions, v: Verdict, kernels: list[str], t0: float
    ) -> VerifyResult:
        try:
            return self._evaluate(reference, candidate, options, v, kernels, t0)
        except Infra as e:
            return VerifyResult.infra(e.kind, e.message, self.device, time.perf_counter() - t0, v.details)
        except Exception as e:  # a verifier bug must never look like a candidate's zero reward
            return VerifyResult.infra(
                "infra", f"verifier error: {type(e).__name__}: {e}", self.device, time.perf_counter() - t0, v.details
            )

    # -- one evaluation -----------------------------------------------------------------------
    def _evaluate(
        self, reference: str, candidate: str, options: VerifyOptions, v: Verdict, kernels: list[str], t0: float
    ) -> VerifyResult:
        key = self._group_key(options)
        group = self._claim(key) if self.spares else self._start_group(key)
        v.details["children"] = "spare" if group.spare else "started for this evaluation"
        if group.refused:
            v.details["spare_refused"] = group.refused
        try:
            t_fork = time.perf_counter()
            group.hand(reference, candidate, lambda d: child_spec(self.device, options, d, kernels))
            v = _Conversation(
                self._timing_lock, self._memory, options, v, group.procs, group.caller, t_fork, group.uid is not None
            ).run()
        finally:
            group.kill()
            for stream in ("stdout", "stderr"):
                tail = read_tail(os.path.join(group.dirs["candidate"], f"{stream}.txt"), options.output_limit_bytes)
                if tail:
                    v.details[f"candidate_{stream}"] = tail
            # The group is dead (killed above); joining it and removing its folders need not delay the verdict.
            reaper = threading.Thread(target=self._discard, args=(group,), name="verifier-reap", daemon=True)
            with self._live_lock:
                self._reapers.add(reaper)
            reaper.start()
        return v.result(t0)

    def warm_spares(self, options: VerifyOptions | None = None, timeout_s: float = 300.0) -> int:
        """Start spare groups for evaluations like `options` and wait (up to `timeout_s`) until `spares` of
        them are ready; returns how many are. Tests and benchmarks use it to know that the next evaluation runs
        on a spare; evaluations themselves never wait for one."""
        key = self._group_key(options or VerifyOptions())
        deadline = time.perf_counter() + timeout_s
        with self._pool_lock:
            self._pools.setdefault(key, [])
        while True:
            with self._pool_lock:
                ready = sum(g.alive() for g in self._pools[key])
                if self._closed or ready >= self.spares or time.perf_counter() > deadline:
                    return ready
                self._start_filling()
            time.sleep(0.02)

    # -- evaluation children, started ahead (spares) or on demand ------------------------------
    def _group_key(self, options: VerifyOptions) -> tuple[bool, int]:
        """What makes two evaluations' groups interchangeable: a replay child or not, and the memory limit."""
        return (self.device == "cpu" and options.timing == "cpu_model", options.memory_limit_mb)

    def _start_filling(self) -> None:
        """Start the background filler unless it runs (the caller holds the pool lock)."""
        if not self._filling:
            self._filling = True
            threading.Thread(target=self._fill, name="verifier-spares", daemon=True).start()

    def _start_group(self, key: tuple[bool, int], spare: bool = False) -> Group:
        try:
            group = Group(self._ctx, self.device, self._interpret, key[0], key[1], spare)
        except Exception as e:
            raise Infra("infra", f"could not start an evaluation child (fork-server down?): {e}") from e
        with self._live_lock:
            self._live.update(group.procs.values())
        return group

    def _discard(self, group: Group) -> None:
        group.kill()
        group.reap()
        with self._live_lock:
            self._live.difference_update(group.procs.values())
            self._reapers.discard(threading.current_thread())

    def _claim(self, key: tuple[bool, int]) -> Group:
        """A spare group for `key` (a fresh one when none is ready); refills the spares in the background."""
        with self._pool_lock:
            pool = self._pools.setdefault(key, [])
            group, stale = None, []
            while pool and group is None:
                g = pool.pop(0)
                if g.alive():
                    group = g
                else:
                    stale.append(g)
            self._start_filling()
        for g in stale:
            self._discard(g)
        refused = group.untouched() if group is not None else None
        if group is not None and refused is None:
            return group
        if group is not None:
            self._discard(group)
        fresh = self._start_group(key)
        fresh.refused = refused
        return fresh

    def _fill(self) -> None:
        """Start spare groups until `spares` wait for every key asked for so far (a failure stops filling:
        evaluations then start their own group and report the error)."""
        try:
            while True:
                with self._pool_lock:
                    short = [k for k, pool in self._pools.items() if len(pool) < self.spares]
                    if self._closed or not short:
                        return
                group = self._start_group(short[0], spare=True)
                with self._pool_lock:
                    if not self._closed:
                        self._pools[short[0]].append(group)
                        group = None
                if group is not None:
                    self._discard(group)
        except Exception:
            return
        finally:
            with self._pool_lock:
                self._filling = False


class _Conversation:
    """The caller's side of one evaluation: the judge's JSON messages, the timeout, deaths, the lock."""

    def __init__(
        self,
        timing_lock: threading.Lock,
        memory: _DeviceMemory,
        options: VerifyOptions,
        v: Verdict,
        procs: dict[str, Any],
        conn: Any,
        t_fork: float,
        shared_uid: bool = False,
    ) -> None:
        self.timing_lock, self.memory = timing_lock, memory
        self.options, self.v, self.procs, self.conn = options, v, procs, conn
        self.t_fork = t_fork
        self.shared_uid = shared_uid  # the candidate runs as the judge's uid (accelerators): it can kill the judge
        self.deadline = time.perf_counter() + options.timeout_s
        self.phase = "start"
        self.compiled = self.loaded = False
        self.holding_lock = False
        self.memory_held = 0

    def run(self) -> Verdict:
        try:
            while True:
                remaining = self.deadline - time.perf_counter()
                if remaining <= 0:
                    return self._timeout()
                judge = self.procs["judge"]
                multiprocessing.connection.wait([self.conn, judge.sentinel], timeout=remaining)
                closed = False
                try:
                    if self.conn.poll(0):
                        message = json.loads(self.conn.recv_bytes(MAX_JUDGE_MESSAGE))
                        done = self._handle(message)
                        if done is not None:
                            return done
                        continue
                except (EOFError, OSError):
                    closed = True  # poll() stays true at EOF: without this the loop spun until the timeout
                    judge.join(5)
                if judge.exitcode is not None and (closed or not self.conn.poll(0)):
                    return self._judge_gone(judge.exitcode)
                if closed:
                    raise Infra("infra", f"the judge closed its channel during {self.phase}")
        finally:
            self._release()
            self._release_memory()

    def _release(self) -> None:
        if self.holding_lock:
            self.holding_lock = False
            self.timing_lock.release()

    def _release_memory(self) -> None:
        if self.memory_held:
            self.memory.release(self.memory_held)
            self.memory_held = 0

    def _handle(self, m: dict[str, Any]) -> Verdict | None:
        kind = m.get("type")
        if kind == "phase":
            self.phase, self.compiled, self.loaded = m["phase"], m["compiled"], m["loaded"]
            self.v.phase_s.setdefault("fork_to_" + self.phase, time.perf_counter() - self.t_fork)
        elif kind == "isolation":
            self.v.details["isolation"] = m["layers"]
        elif kind == "want_timing":
            if m.get("needs_device"):
                t_wait = time.perf_counter()
                self.timing_lock.acquire()
                self.holding_lock = True
                waited = time.perf_counter() - t_wait
                self.v.phase_s["timing_lock_wait"] = waited
                self.deadline += waited
            self.conn.send_bytes(b'{"type": "go"}')
        elif kind == "want_memory":
            t_wait = time.perf_counter()
            self.memory_held = self.memory.acquire(int(m.get("bytes", 0)))
            waited = time.perf_counter() - t_wait
            self.v.phase_s["memory_wait"] = waited
            self.deadline += waited
            self.conn.send_bytes(b'{"type": "granted"}')
        elif kind in ("pause_candidate", "resume_candidate"):
            pause = kind == "pause_candidate"
            self._signal_candidate(signal.SIGSTOP if pause else signal.SIGCONT)
            self.conn.send_bytes(b'{"type": "paused"}' if pause else b'{"type": "resumed"}')
        elif kind == "timing_done":
            self._release()
        elif kind == "done":
            return self._merge(Verdict.from_json(m["verdict"]))
        elif kind == "candidate_gone":
            return self._crash(Verdict.from_json(m["verdict"]), m["phase"])
        elif kind == "infra":
            raise Infra(m.get("kind", "infra"), m.get("message", "judge failure"))
        return None

    def _signal_candidate(self, sig: int) -> None:
        """Stop or continue the candidate's whole process tree: the judge asks for it around each turn of the reference
        it times, so that nothing of the candidate's runs beside the reference then (issue 35, red-team finding F2:
        a thread of the candidate's slowed the reference's timed calls). The judge, pid 1 of its own PID namespace,
        cannot see the candidate's process; this process holds its pid."""
        pid = self.procs["candidate"].pid
        if pid is None:
            return
        for target in [pid, *descendants(pid)]:
            try:
                os.kill(target, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def _merge(self, judged: Verdict) -> Verdict:
        judged.checks = self.v.checks + judged.checks
        judged.hacks = self.v.hacks + [h for h in judged.hacks if h not in self.v.hacks]
        judged.details = {**self.v.details, **judged.details}
        judged.phase_s = {**self.v.phase_s, **judged.phase_s}
        return judged

    def _crash(self, judged: Verdict, phase: str) -> Verdict:
        cand = self.procs["candidate"]
        cand.join(2)
        code = cand.exitcode
        if code is None:
            message = f"candidate process closed its channel during {phase}"
        elif code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            message = f"candidate process killed by {name} during {phase}"
        else:
            message = f"candidate process exited with status {code} during {phase}"
        judged = self._merge(judged)
        judged.correct = False
        judged.error = {"kind": "crash", "message": message}
        return judged

    def _judge_gone(self, code: int) -> Verdict:
        """No verdict from the judge, which died. Where the candidate shares its uid (accelerators) it may have
        killed the judge to turn its zero into a masked sample, so the death counts against it; elsewhere the
        candidate cannot reach the judge and the verifier failed."""
        message = f"the judge exited with code {code} during {self.phase}"
        if not self.shared_uid:
            raise Infra("infra", message)
        self.v.compiled, self.v.loaded, self.v.correct = self.compiled, self.loaded, False
        self.v.error = {"kind": "crash", "message": message + " (the candidate runs as the judge's uid here)"}
        return self.v

    def _timeout(self) -> Verdict:
        self.v.compiled = self.compiled
        self.v.loaded = self.loaded
        self.v.correct = False
        self.v.error = {
            "kind": "timeout",
            "message": f"evaluation exceeded {self.options.timeout_s:g} s during {self.phase}",
        }
        return self.v


class _DeviceMemory:
    """Estimated device bytes held by running evaluations; a request waits until it fits in the budget,
    or until nothing else holds any (an evaluation larger than the budget then runs alone)."""

    def __init__(self, budget: int) -> None:
        self._cond = threading.Condition()
        self._budget, self._used = budget, 0

    def acquire(self, n: int) -> int:
        n = max(0, n)
        with self._cond:
            self._cond.wait_for(lambda: self._used == 0 or self._used + n <= self._budget)
            self._used += n
        return n

    def release(self, n: int) -> None:
        with self._cond:
            self._used -= n
            self._cond.notify_all()


class _Slot:
    """One evaluation's admission; `shared` once any other evaluation overlapped it."""

    def __init__(self) -> None:
        self.shared = False


class _Admission:
    """Up to `slots` evaluations share the device; an exclusive one waits until none runs and holds new
    ones back while it waits and runs."""

    def __init__(self, slots: int) -> None:
        self._cond = threading.Condition()
        self._slots, self._active, self._exclusive, self._waiting = slots, 0, False, 0
        self._live: set[_Slot] = set()

    @contextlib.contextmanager
    def shared(self) -> Iterator[_Slot]:
        """A slot; its `shared` turns true once another evaluation ran at the same time."""
        slot = _Slot()
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive and not self._waiting and self._active < self._slots)
            self._active += 1
            self._live.add(slot)
            if len(self._live) > 1:
                for other in self._live:
                    other.shared = True
        try:
            yield slot
        finally:
            with self._cond:
                self._active -= 1
                self._live.discard(slot)
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            self._cond.wait_for(lambda: not self._exclusive and self._active == 0)
            self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


def _out_of_memory(result: VerifyResult) -> bool:
    """The judge or the reference runner could not get device memory (infra_error). A candidate's own fault
    text is never read for this: any kernel can raise an exception that says "out of memory"."""
    if result.status != "infra_error":
        return False
    message = (result.error.message if result.error else "").lower()
    return any(m in message for m in ("outofmemoryerror", "out of memory", "out of device memory"))


def _candidate_out_of_memory(result: VerifyResult) -> bool:
    """The candidate's process reported running out of device memory. Its own text, so it is only used to judge
    an evaluation again alone when the device was shared (the most a false claim buys is that one re-run)."""
    if result.status != "ok" or not result.error or result.error.kind != "runtime":
        return False
    message = result.error.message.lower()
    return "outofmemoryerror" in message or "out of memory" in message


def _accelerator_nodes() -> bool:
    """Cheap, torch-free hint that a GPU or NPU may exist (device nodes); the probe decides."""
    import glob

    return bool(glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/nvidiactl") or glob.glob("/dev/davinci[0-9]*"))


def verify(reference: str, candidate: str, options: VerifyOptions | None = None) -> VerifyResult:
    """One-shot evaluation (starts and discards a Verifier; keep a Verifier for many calls)."""
    options = options or VerifyOptions()
    try:
        verifier = Verifier(device=options.device, max_concurrency=1)
    except DeviceUnavailable as e:
        return VerifyResult.infra("usage", str(e), options.device)
    except Exception as e:  # the fork-server or the device probe failed: no verdict
        return VerifyResult.infra("infra", f"could not start the verifier: {type(e).__name__}: {e}", options.device)
    with verifier:
        return verifier.verify(reference, candidate, options)
