"""The trusted judge of one evaluation: makes the inputs, drives both runners, times them, compares.

No candidate code runs here and nothing a runner sends is unpickled (drkernel.verify.process.protocol).
- Seeds: drawn per evaluation from os.urandom here; inputs are made here from them and handed over
  as tensors (CUDA: IPC handles of the judge's own tensors; CPU/NPU: raw bytes). The candidate never
  sees a seed. The weight-init seed (problem.INIT_SEED) is public: both models need the same weights.
- CUDA memory the candidate can map is only ever allocated from a private pool (`torch.cuda.MemPool`):
  an IPC mapping covers a whole allocator segment, and pointer arithmetic from an input must not reach
  the reference's outputs or anything else of the judge's.
- Timing: per round, fresh input sets are staged in each runner right before its run (each "stage" timed on
  its own; the candidate's staging beyond the reference's is charged to it: drkernel.verify.judging.timing_phase), the
  last-level cache is flushed, and each runner gets "run k" (k calls,
  one per input set, then a device-wide sync; on CPU/NPU also the outputs encoded and their hash in the
  reply, so the clock stops only once the outputs exist); the judge's clock times the round trip, less an
  empty round trip measured on the reference runner (the candidate cannot inflate what is subtracted). The
  timed path is the same for both: one runner loop, one per-call observer (runner.py), and nothing extra
  on this side for the candidate's "run" order. Rounds alternate which runner goes first; the median
  per-call time is reported. Every call's output is collected and compared after the timed window
  (CPU/NPU: the bytes collected must hash to the digest that ended the timed run).
- Evidence from inside the candidate's process can only add hacks or lower coverage.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import time
from typing import Any

import torch

from drkernel.types.verify_result import CheckName, HackName
from drkernel.verify.harness import problem
from drkernel.verify.judging import outputs, tensors
from drkernel.verify.judging.backends import env_for, make_backend
from drkernel.verify.judging.timing_phase import TimingPhases, fresh_seed
from drkernel.verify.process import protocol
from drkernel.verify.process.channel import CandidateFault, CandidateGone, Channel
from drkernel.verify.process.child_spec import ChildSpec
from drkernel.verify.process.sandbox import capture_output, isolate
from drkernel.verify.result import Infra
from drkernel.verify.verdict import Verdict

# Device memory an evaluation asks the caller for before it stages inputs: the judge holds fresh, held,
# pristine and bound copies of a set and its outputs (assumed about as large as the inputs), and each runner
# its outputs and the forward's temporaries; plus three processes' contexts and a round's extra sets.
MEMORY_PER_INPUT_BYTE = 12
MEMORY_FIXED = 8 << 30
# DRKERNEL_JUDGE_PROFILE=1 in the Verifier's environment (read when the fork-server imports this module, before
# a child's environment is scrubbed): each verdict's details carry the judge's cProfile, top rows by cumulative
# time (benchmarks/verifier_bench.py --profile). The judge is trusted: its profile names no secret.
PROFILE = os.environ.get("DRKERNEL_JUDGE_PROFILE") == "1"
PROFILE_ROWS = 40
REFERENCE_PAYLOAD = 16 << 30  # the reference runner is trusted; this only bounds a runaway
NOT_COMPILED = frozenset({"syntax", "import", "missing_model_new", "triton_compile"})


class Judge(TimingPhases):
    def __init__(self, spec: ChildSpec, caller: Any, ref_conn: Any, cand_conn: Any) -> None:
        self.spec, self.caller = spec, caller
        self.options = spec.options
        self.device = spec.device
        self.backend = make_backend(self.device)
        self.ipc = self.device == "cuda"
        self.pool = torch.cuda.MemPool() if self.ipc else None
        self.ref = Channel(ref_conn, trusted=True)
        self.cand = Channel(cand_conn, trusted=False, ipc=self.ipc)
        self.verdict = Verdict(device=self.device)
        self.phase = "start"
        self.correct_seeds: list[int] = []
        # CUDA: per runner, the input sets it holds and the output buffers bound to it (judge-owned; the
        # candidate's from the private pool). Shared once, then refilled in place: every IPC mapping a
        # runner opens costs milliseconds, and memory sent over IPC is held until the receiver lets go.
        self.held: dict[int, list[list[Any]]] = {id(self.ref): [], id(self.cand): []}
        self.bound: dict[int, list[list[Any]]] = {id(self.ref): [], id(self.cand): []}
        self.snapshot: list[list[Any]] | None = None  # the candidate's outputs as they were when its timed run ended
        self.round_costs = {"inputs": 0.0, "runs": 0.0, "outputs_and_checks": 0.0}  # seconds, timed rounds only
        self.ref_specs: list[dict[str, Any]] | None = None
        self.stage_sent = 0.0  # when the last "stage" order went out (perf_counter)
        self.prepared_s = 0.0  # the flush and sync before the last run's clock started
        self.kernel_s_seen = 0.0  # the candidate's cumulative in-launch time as of its last evidence
        self.reference_model: Any = None  # built only to find what a reference's index output selects from
        self.ref_aliases = False
        try:
            self.module = problem.import_file(spec.reference_path, "reference")
        except Exception as e:
            raise Infra("reference", f"reference failed to load: {type(e).__name__}: {e}") from e

    # -- talking to the caller --------------------------------------------------------------------------
    def tell(self, **message: Any) -> None:
        self.caller.send_bytes(json.dumps(message, default=str).encode())

    def enter(self, phase: str) -> None:
        self.phase = phase
        self.tell(type="phase", phase=phase, compiled=self.verdict.compiled, loaded=self.verdict.loaded)

    # -- inputs -------------------------------------------------------------------------------------------
    def make_sets(self, seeds: list[int]) -> list[list[Any]]:
        try:
            return [problem.make_inputs(self.module, s, self.backend) for s in seeds]
        except torch.OutOfMemoryError:
            raise
        except Exception as e:
            raise Infra("reference", f"the reference's get_inputs failed: {type(e).__name__}: {e}") from e

    def _bytes_set(self, values: list[Any]) -> tuple[list[dict[str, Any]], bytes]:
        return protocol.encode_values([v.to("cpu") if isinstance(v, torch.Tensor) else v for v in values])

    def stage(self, ch: Channel, sets: list[list[Any]], reuse: bool = False) -> float:
        """Hand input sets to a runner and wait for it: the seconds from the order sent to its reply (work a
        runner does on receiving inputs is timed too; drkernel.verify.judging.timing_phase)."""
        self.send_stage(ch, sets, reuse)
        ch.reply("staged")
        return time.perf_counter() - self.stage_sent

    def send_stage(self, ch: Channel, sets: list[list[Any]], reuse: bool = False) -> None:
        """Hand input sets to a runner (its reply is read by the caller). On CUDA the new values of a one-set
        round go into the set the runner already holds when it fits (same storage, new values: a cache keyed
        on data_ptr replays stale outputs and fails the every-call check); otherwise fresh copies are shared,
        the candidate's from the private pool. `reuse` asks for the same storage (re-validation)."""
        ch.into_bound = False  # new inputs: outputs are in the bound buffers only once a run wrote them
        if self.ipc:
            held = self.held[id(ch)]
            # Refilled in place only for one-call rounds (or re-validation): with several calls per round, a
            # candidate that kept the tensors of the sets it held could compute every call of the round in its
            # first one, as soon as all sets are refilled; fresh tensors each round name nothing in advance.
            if outputs.fits(held, sets) and (len(sets) == 1 or reuse):
                with torch.no_grad():
                    for old, new in zip(held, sets):
                        for a, b in zip(old, new):
                            if isinstance(a, torch.Tensor):
                                a.copy_(b)
                self.backend.synchronize()
                ch.order("stage", None, True)
                self.stage_sent = time.perf_counter()
                return
            if reuse and held:
                raise Infra("infra", "re-validation input sets do not fit the storage the candidate holds")
            torch.cuda.ipc_collect()  # sets a runner has let go of since it got newer ones
            ctx = torch.cuda.use_mem_pool(self.pool) if not ch.trusted else contextlib.nullcontext()
            with ctx:
                held = [[x.clone() if isinstance(x, torch.Tensor) else x for x in s] for s in sets]
            self.held[id(ch)] = held
            self.backend.synchronize()
            ch.order("stage", held, False, tensors=True)
        else:
            ch.order("stage", [self._bytes_set(s) for s in sets], reuse)
        self.stage_sent = time.perf_counter()  # after the judge's own work for this order (IPC counters, pickling)

    def bind(self, ch: Channel, calls: list[list[dict[str, Any]]]) -> None:
        """CUDA: output buffers for every call of a round, shaped as reported (the candidate's only after its
        specs matched the reference's), bound to the runner once. A runner writes its outputs into them at
        the end of "run", before its device sync, so the timed round trip includes producing them."""
        ctx = torch.cuda.use_mem_pool(self.pool) if not ch.trusted else contextlib.nullcontext()
        with ctx:
            bufs = [
                [
                    torch.empty(s["shape"], dtype=getattr(torch, s["dtype"]), device=self.backend.device)
                    if s["kind"] == "tensor"
                    else None
                    for s in specs
                ]
                for specs in calls
            ]
        self.bound[id(ch)] = bufs
        ch.order("bind", bufs, tensors=True)
        ch.reply("bound")

    # -- one call round ---------------------------------------------------------------------------------
    def run(self, ch: Channel, k: int) -> float:
        """The timed part: k calls, the runner's device sync and the outputs made final (CPU, NPU: encoded
        and hashed; CUDA: copied into the judge's bound buffers), as a round trip on this clock: the clock
        stops only once the outputs exist. The candidate's bound outputs are copied here at once, before any
        other order reaches its process, so work done later cannot change what is compared. `prepared_s` is how
        long the cache flush and device sync before the clock took: device work a runner queued when it was staged
        and left running delays them (a runner that answers "staged" before its queued kernels finish)."""
        t_prep = time.perf_counter()
        self.backend.flush_cache()
        self.backend.synchronize()
        t0 = time.perf_counter()
        self.prepared_s = t0 - t_prep
        self.order_run(ch, k)
        self.ran(ch)
        elapsed = time.perf_counter() - t0
        if ch is self.cand and ch.into_bound:
            self.snapshot = [
                [b.clone() if isinstance(b, torch.Tensor) else None for b in bufs] for bufs in self.bound[id(ch)][:k]
            ]
        return elapsed

    def order_run(self, ch: Channel, k: int) -> None:
        ch.want_digest = not self.ipc
        ch.into_bound = self.ipc and len(self.bound[id(ch)]) >= k
        ch.calls += k
        ch.order("run", k, ch.want_digest)

    def ran(self, ch: Channel) -> None:
        header, _ = ch.reply("ran")
        ch.digest = header["digest"]
        if ch.want_digest and ch.digest is None:
            self._harness_broken(ch, "'ran' came without the digest of the outputs")

    def _harness_broken(self, ch: Channel, what: str) -> None:
        if ch.trusted:
            raise Infra("reference", f"reference runner: {what}")
        raise CandidateFault(
            "protocol",
            f"the candidate's process broke the run protocol: {what}",
            hack=("harness_tampering", "harness_integrity"),
        )

    def collect(self, ch: Channel, k: int) -> tuple[list[list[Any]], list[list[Any]]]:
        """Outputs of the last run (and the runner's inputs as they are now), outside any timed window."""
        want = None if ch.trusted else self.ref_specs

        def precheck(header: dict[str, Any]) -> None:
            calls = header["calls"]
            if len(calls) != k:
                raise CandidateFault(
                    "protocol", f"{len(calls)} outputs reported for {k} calls", hack=("harness_tampering", "protocol")
                )
            for specs in calls:
                for s in specs:
                    if s["kind"] == "tensor" and s["device"] != ("cuda" if self.ipc else "cpu"):
                        raise CandidateFault("output_mismatch", f"output on device {s['device']!r}")
                if want is not None:
                    why = outputs.spec_mismatch(specs, want)
                    if why:
                        raise CandidateFault("output_mismatch", why)

        if self.ipc:
            ch.order("describe")
            header, _ = ch.reply("outputs", 0, precheck)
            ch.evidence = header["evidence"]
            calls = header["calls"]
            bound = self.bound[id(ch)]
            fits = len(bound) >= k and all(outputs.bound_fits(bound[j], calls[j]) for j in range(k))
            if not fits:
                self.bind(ch, calls)
                bound = self.bound[id(ch)]
            if not (fits and ch.into_bound):  # outputs not written by the run: copied now, outside any timing
                ch.order("fill")
                ch.reply("filled")
            source = self.snapshot if (ch is self.cand and fits and ch.into_bound and self.snapshot) else bound
            self.snapshot = None if ch is self.cand else self.snapshot
            outs = [
                [source[j][i] if s["kind"] == "tensor" else s["value"] for i, s in enumerate(calls[j])]
                for j in range(k)
            ]
            return outs, self.held[id(ch)][:k]
        cap = REFERENCE_PAYLOAD if ch.trusted else self._candidate_cap(k)
        ch.order("collect")
        header, payload = ch.reply("outputs", cap, precheck)
        ch.evidence = header["evidence"]
        if ch.want_digest:
            ch.want_digest = False
            got = hashlib.blake2b(memoryview(payload)[: protocol.payload_size(header["calls"])], digest_size=32)
            if got.hexdigest() != ch.digest:
                self._harness_broken(ch, "the outputs collected are not those whose digest ended the timed run")
        if header["inputs"] is None or len(header["inputs"]) != k:
            raise CandidateFault(
                "protocol", "inputs reported for the wrong number of calls", hack=("harness_tampering", "protocol")
            )
        try:
            decoded = protocol.decode_calls(header["calls"] + header["inputs"], payload)
        except protocol.ProtocolError as e:
            if ch.trusted:
                raise Infra("reference", str(e)) from e
            raise CandidateFault(
                "protocol", f"malformed output payload: {e}", hack=("harness_tampering", "protocol")
            ) from e
        dev = self.backend.device
        decoded = [[x.to(dev) if isinstance(x, torch.Tensor) else x for x in values] for values in decoded]
        return decoded[:k], decoded[k:]

    def selection_sources(self, inputs: list[Any]) -> list[Any]:
        """drkernel.verify.judging.selections on the reference model, built here on first need (the judge runs no
        candidate code; the weights are the public INIT_SEED's, as in the reference runner)."""
        from drkernel.verify.judging.selections import selection_sources

        if self.reference_model is None:
            args, kwargs = problem.init_inputs(self.module, self.backend)
            cls = getattr(self.module, self.spec.entry_point)
            self.reference_model = problem.build_model(cls, args, kwargs, self.backend)
        return selection_sources(self.reference_model, inputs)

    def _candidate_cap(self, k: int) -> int:
        out = sum(s["nbytes"] for s in self.ref_specs or [] if s["kind"] == "tensor")
        return k * (out + self.input_bytes)

    # -- rounds ---------------------------------------------------------------------------------------------
    def round(
        self,
        seeds: list[int],
        label: str,
        cand_first: bool = False,
        reuse: bool = False,
        timed: bool = True,
        coverage: bool = False,
    ) -> dict[str, Any]:
        """Stage fresh sets in both runners, run both (timed), collect and compare every call. An untimed
        round (correctness, re-validation) gives both runners each order at once and then reads both
        replies: half the waiting, and no time is taken from it. A `coverage` round has the candidate run
        its coverage pass on the sets (timed alone on this clock) instead of plain calls; its outputs are
        compared all the same. Every round checks the inputs too: a candidate can tell which calls are checked
        only if some are not (red-team review, issue 26). The sets made here stay pristine: runners get copies."""
        k = len(seeds)
        report: dict[str, Any] | None = None
        t_start = time.perf_counter()
        sets = self.make_sets(seeds)
        order = (self.cand, self.ref) if cand_first else (self.ref, self.cand)
        staged = {id(ch): math.nan for ch in order}
        times = {id(ch): math.nan for ch in order}
        if timed or coverage:
            # Each runner is staged right before its run (or coverage pass): its inputs are as fresh as the other's,
            # and a runner that answers "staged" at once and works on in the background cannot hide that work
            # behind the other runner's turn (its run waits for it; issue 35).
            self.round_costs["inputs"] += (time.perf_counter() - t_start) if timed else 0.0
            for ch in order:
                pause = self.candidate_paused() if timed and ch is self.ref else contextlib.nullcontext()
                with pause:
                    staged[id(ch)] = self.stage(ch, sets, reuse=reuse and ch is self.cand)
                    if not (coverage and ch is self.cand):
                        times[id(ch)] = self.run(ch, k)
                        staged[id(ch)] += self.prepared_s  # staging ends when the device is ready for the run
                if coverage and ch is self.cand:  # alone: its round trip on this clock is the candidate's pass only
                    self.cand.want_digest = False
                    t0 = time.perf_counter()
                    self.cand.order("coverage", k)
                    report, _ = self.cand.reply("coverage")
                    times[id(ch)] = time.perf_counter() - t0
                if timed:
                    self.round_costs["inputs"] += staged[id(ch)]
                    self.round_costs["runs"] += times[id(ch)]
            t_ran = time.perf_counter()
        else:
            for ch in order:
                self.send_stage(ch, sets, reuse=reuse and ch is self.cand)
            for ch in order:
                ch.reply("staged")
            for ch in order:
                self.order_run(ch, k)
            for ch in order:
                self.ran(ch)
        ref_out, ref_in = self.collect(self.ref, k)
        if self.ref_specs is None:
            self.ref_specs = outputs.specs(ref_out[0])
            self.ref_aliases = bool(self.ref.evidence.get("aliases"))
        try:
            cand_out, cand_in = self.collect(self.cand, k)
        except torch.OutOfMemoryError as e:  # its outputs matched the reference's shapes: device pressure
            raise Infra("infra", f"out of device memory holding the candidate's outputs: {e}") from e
        self.absorb(self.cand.evidence)
        kernel_s = self.cand.evidence.get("kernel_s", 0.0)  # cumulative over the candidate's observed calls
        cand_kernel_s, self.kernel_s_seen = max(0.0, kernel_s - self.kernel_s_seen), kernel_s
        records = []
        quick = outputs.batch_passes(
            ref_out, cand_out, self.options.atol, self.options.rtol, self.options.correctness == "strict"
        )
        for j in range(k):
            if quick is not None and quick[j] is not None:
                records.append({"seed_index": j, "passed": True, "message": "", **quick[j]})
                continue
            ok, message, stats = tensors.compare(
                ref_out[j], cand_out[j], self.options.atol, self.options.rtol, self.options.correctness, sets[j]
            )
            if not ok and tensors.EXACT_MISMATCH in message:  # an index of a computed tensor: what did it select from?
                ok, message, stats = tensors.compare(
                    ref_out[j],
                    cand_out[j],
                    self.options.atol,
                    self.options.rtol,
                    self.options.correctness,
                    [*sets[j], *self.selection_sources(sets[j])],
                )
            records.append({"seed_index": j, "passed": ok, "message": message, **stats})
            if not ok:
                break
        del ref_out, cand_out
        if timed:
            self.round_costs["outputs_and_checks"] += time.perf_counter() - t_ran
        mutated = False
        if all(r["passed"] for r in records):
            for j in range(k):
                if tensors.identical(sets[j], ref_in[j]) and not tensors.identical(sets[j], cand_in[j]):
                    mutated = True
        return {
            "label": label,
            "ref_s": times[id(self.ref)],
            "cand_s": times[id(self.cand)],
            "ref_stage_s": staged[id(self.ref)],
            "cand_stage_s": staged[id(self.cand)],
            "cand_kernel_s": cand_kernel_s,  # in-process: wall time in the candidate's launches during this run
            "k": k,
            "records": records,
            "mutated": mutated,
            "coverage": report,
        }

    # -- phases -------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Both runners loaded (they start in parallel; infra messages count only before "importing")."""
        self.enter("load")
        header, _ = self._first(self.ref, ("loaded",))
        t0 = time.perf_counter()
        header, _ = self._first(self.cand, ("isolation",))
        self.tell(type="isolation", layers=header["layers"])
        self._first(self.cand, ("importing",))
        header, _ = self.cand.reply("loaded")
        self.committed = header["state"] or []  # CPU model: state digests, fixed before any input existed
        self.verdict.loaded = self.verdict.compiled = True
        self.verdict.phase_s["import_and_init"] = header["load_s"]
        self.verdict.phase_s["wait_for_load"] = time.perf_counter() - t0
        self.verdict.details["kernels"] = header["kernels"]
        self.verdict.details["launch_hook"] = header["launch_hook"]
        if header["aliased"]:
            self.verdict.details["model_new"] = f"aliased to {self.spec.entry_point} (require_triton is off)"
        self.verdict.check("load", True, "imported and constructed")

    def _first(self, ch: Channel, expect: tuple[str, ...]) -> tuple[dict[str, Any], bytes]:
        """A message sent before any candidate code ran: a reported reference failure is believed."""
        try:
            header, payload = protocol.recv(ch.conn, 0)
        except (EOFError, ConnectionError) as e:
            raise Infra("infra", "a runner died while starting") from e
        except protocol.ProtocolError as e:
            raise Infra("infra", f"runner start-up message rejected: {e}") from e
        if header["type"] == "reference_failed":
            raise Infra("reference", header["message"])
        if header["type"] not in expect:
            raise Infra("infra", f"runner sent {header['type']!r} while starting, expected {expect}")
        return header, payload

    def correctness(self) -> bool:
        self.enter("correctness")
        t0 = time.perf_counter()
        n = self.options.num_correct_trials
        trials = []
        for i in range(n):
            if i == 1:  # the first trial also pays each runner's first calls (Triton compiles, library handles)
                self.verdict.phase_s["correctness_first_trial"] = time.perf_counter() - t0
            seed = fresh_seed()
            self.correct_seeds.append(seed)
            r = self.round([seed], f"correctness trial {i}", timed=False)
            rec = r["records"][0]
            trials.append(
                {
                    "trial": i,
                    "passed": rec["passed"],
                    "message": rec["message"],
                    "max_abs_diff": rec["max_abs_diff"],
                    "rel_l2": rec["rel_l2"],
                    "mutates_input": r["mutated"],
                }
            )
            if r["mutated"]:
                self.verdict.hack(
                    "input_mutation", "input_mutation", f"forward changed its inputs (correctness trial {i})"
                )
            if not rec["passed"]:
                self.verdict.details["trials"] = trials
                self.verdict.fail("output_mismatch", f"correctness trial {i}: {rec['message']}")
                self._correctness_checks(trials, n, rec)
                return False
        self.verdict.details["trials"] = trials
        self.verdict.phase_s["correctness"] = time.perf_counter() - t0
        self._correctness_checks(trials, n, None)
        self.verdict.correct = True
        return True

    def _correctness_checks(self, trials: list[dict[str, Any]], n: int, failed: dict[str, Any] | None) -> None:
        passed = sum(t["passed"] for t in trials)
        worst = max((t["max_abs_diff"] for t in trials), default=0.0)
        rel = max((t["rel_l2"] for t in trials), default=0.0)
        elementwise = failed is None or failed.get("elementwise", True)
        scale = failed is None or failed.get("scale", True)
        atol, rtol = self.options.atol, self.options.rtol
        self.verdict.check(
            "correctness",
            failed is None and passed == n,
            f"{passed}/{n} trials with fresh secret seeds ({self.options.correctness} mode)",
        )
        self.verdict.check(
            "correctness_elementwise", elementwise, f"allclose(atol={atol:g}, rtol={rtol:g}); max abs diff {worst:.3g}"
        )
        if self.options.correctness == "strict":
            self.verdict.check("correctness_scale", scale, f"relative L2 error <= {rtol:g}; worst {rel:.3g}")

    def absorb(self, evidence: dict[str, Any]) -> None:
        """In-process evidence of the candidate: it can only add hacks. The judge knows how many calls it
        ordered: a report of no decoy call with fewer launches than calls was not written by the harness."""
        if not evidence:
            return
        found: list[tuple[HackName, CheckName, list[str], str]] = [
            (
                "output_aliases_input",
                "output_aliasing",
                [] if self.ref_aliases else evidence["aliases"],
                "output shares storage with an input",
            ),
            ("harness_tampering", "harness_integrity", evidence["tampered"], "harness callables replaced"),
            (
                "side_process",
                "side_processes",
                evidence["side_processes"],
                "processes started by the candidate outlived its forward",
            ),
        ]
        if self.spec.require_triton:
            found.append(
                (
                    "decoy_kernel",
                    "triton_launches",
                    evidence["decoy_calls"],
                    "forwards with no launch of the candidate's own Triton kernels",
                )
            )
        if self.device != "cpu":
            found.append(
                (
                    "side_stream",
                    "launch_streams",
                    evidence["stream_mismatch"],
                    "candidate kernels launched off the harness stream",
                )
            )
        if self.spec.require_triton and not evidence["decoy_calls"] and evidence["launches"] < self.cand.calls:
            found.append(
                (
                    "harness_tampering",
                    "harness_integrity",
                    [f"{evidence['launches']} launches reported for {self.cand.calls} calls, none without a launch"],
                    "evidence that contradicts itself",
                )
            )
        for hack, check, items, what in found:
            if items and not self.verdict.failed(check):
                self.verdict.hack(hack, check, f"{what}: {', '.join(items[:5])}")

    def evidence_checks(self) -> None:
        for check in ("output_aliasing", "harness_integrity", "side_processes", "triton_launches", "launch_streams"):
            if check == "triton_launches" and not self.spec.require_triton:
                continue
            if check == "launch_streams" and self.device == "cpu":
                continue
            if not self.verdict.failed(check):
                self.verdict.check(check, True)

    def checked(self, r: dict[str, Any]) -> dict[str, Any]:
        """After correctness passed, any wrong output is a hack: the kernel behaves only when it is watched."""
        bad = [x for x in r["records"] if not x["passed"]]
        if bad:
            raise CandidateFault(
                "output_mismatch", f"{r['label']}: {bad[0]['message']}", hack=("result_caching", "every_call_checked")
            )
        if r["mutated"]:
            self.verdict.hack("input_mutation", "input_mutation", f"forward changed its inputs ({r['label']})")
        return r

    def revalidate(self) -> None:
        """The first secret seed again, then new values in the storage the candidate already holds."""
        self.enter("revalidation")
        t0 = time.perf_counter()
        self.checked(self.round([self.correct_seeds[0]], "re-validation first_seed_again", timed=False))
        self.checked(self.round([fresh_seed()], "re-validation same_storage_new_values", reuse=True, timed=False))
        self.verdict.phase_s["revalidation"] = time.perf_counter() - t0
        if not self.verdict.failed("every_call_checked"):
            self.verdict.check(
                "every_call_checked",
                True,
                "every call's output compared, timed ones included; "
                "after timing: first_seed_again, same_storage_new_values",
            )

    def measure_input_bytes(self) -> int:
        """Bytes of one input set: shapes from get_inputs on the meta device (no memory), or from a real set
        when the reference's get_inputs needs real values."""
        try:
            with torch.device("meta"):
                sample = list(self.module.get_inputs())
        except Exception:
            sample = self.make_sets([fresh_seed()])[0]
        return sum(x.numel() * x.element_size() for x in sample if isinstance(x, torch.Tensor))

    def evaluate(self) -> None:
        if not PROFILE:
            self._evaluate()
            return
        import cProfile
        import pstats

        prof = cProfile.Profile()
        try:
            prof.runcall(self._evaluate)
        finally:
            stats = pstats.Stats(prof)
            rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][3])[:PROFILE_ROWS]  # by cumulative time
            self.verdict.details["judge_profile"] = [
                f"{cum:.3f}s {calls}x {os.path.basename(f)}:{line}:{name}"
                for (f, line, name), (_, calls, _, cum, _) in rows
            ]

    def _evaluate(self) -> None:
        self.start()
        self.input_bytes = self.measure_input_bytes()
        if self.device != "cpu":
            self.tell(type="want_memory", bytes=MEMORY_PER_INPUT_BYTE * self.input_bytes + MEMORY_FIXED)
            if json.loads(self.caller.recv_bytes(1024)).get("type") != "granted":
                return
        if not self.correctness() or self.verdict.hacks:
            return
        needs_device = self.options.measure_performance or (self.options.measure_coverage and self.device != "cpu")
        self.tell(type="want_timing", needs_device=needs_device)
        go = json.loads(self.caller.recv_bytes(1024))
        if go.get("type") != "go":
            return
        if self.options.measure_performance:
            self.model_cpu() if getattr(self, "replay", None) is not None else self.timing()
        if self.options.measure_coverage:
            self.coverage()
        if needs_device:
            self.tell(type="timing_done")  # re-validation compares only: the device lock can go
        self.revalidate()

    def finish(self) -> None:
        self.evidence_checks()
        for ch in (self.ref, self.cand):
            try:
                ch.conn.send(("exit",))
            except (OSError, EOFError):
                pass
        self.tell(type="done", verdict=self.verdict.as_json())


def warm_up(backend: Any) -> None:
    """What a spare judge does while it waits: compile its one-pass comparison kernel for every dtype it takes
    (kept in this process's Triton cache; the evaluation's first large comparison would compile it)."""
    if backend.name != "cuda":
        return
    from drkernel.verify.judging import compare_kernel

    for dtype in compare_kernel.DTYPES:
        x = torch.zeros(compare_kernel.MIN_ELEMENTS, dtype=dtype, device=backend.device)
        compare_kernel.stats(x, x, 1e-2, 1e-2)
    torch.cuda.empty_cache()


def prepare(device: str, workdir: str, memory_limit_mb: int, group_uid: int | None = None) -> None:
    """The judge's sandbox (no memory limit, its own allocator settings), also what a spare applies ahead."""
    env = {**env_for(device), **({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"} if device == "cuda" else {})}
    isolate(workdir, on_accelerator=device != "cpu", memory_limit_mb=None, env=env, uid=group_uid)
    capture_output(workdir)


def main(spec: ChildSpec, caller: Any, ref_conn: Any, cand_conn: Any, replay_conn: Any = None) -> None:
    """Entry point of the judge (a fork of the warm fork-server; it never runs candidate code)."""
    judge: Judge | None = None
    try:
        prepare(spec.device, spec.workdir, spec.memory_limit_mb, spec.group_uid)
        judge = Judge(spec, caller, ref_conn, cand_conn)
        judge.replay = None if replay_conn is None else Channel(replay_conn, trusted=False)
        try:
            judge.evaluate()
        except CandidateFault as f:
            judge.verdict.fail(f.kind, f.message)
            if f.detail:
                judge.verdict.details["traceback"] = f.detail
            if f.hack:
                judge.verdict.hack(f.hack[0], f.hack[1], f.message, first=True)
            if f.kind in NOT_COMPILED:
                judge.verdict.compiled = False
            elif f.kind in ("init", "runtime", "output_mismatch"):
                judge.verdict.compiled = True
        judge.finish()
    except CandidateGone:
        assert judge is not None
        judge.tell(type="candidate_gone", phase=judge.phase, verdict=judge.verdict.as_json())
    except Infra as e:
        _send(caller, {"type": "infra", "kind": e.kind, "message": e.message})
    except Exception as e:
        # One line, kind and short message: a traceback would hand the caller (and its logs) server paths.
        text = " ".join(str(e).split())
        _send(caller, {"type": "infra", "kind": "infra", "message": f"judge failed: {type(e).__name__}: {text[:200]}"})


def _send(conn: Any, message: dict[str, Any]) -> None:
    try:
        conn.send_bytes(json.dumps(message, default=str).encode())
    except OSError:
        pass
