"""Throughput and honesty of our verifier against a KernelGYM-style baseline, side by side in one run.

A fixed candidate set over KernelBench problems (benchmarks/candidate_set.py; `--set issue8`, the default, is
issue 8's level-1 list, `--set all` every level-1/2 problem of the set): every problem submitted as its own
candidate (require_triton off: its speedup against itself should be 1.00 +- 0.03), honest Triton kernels from
benchmarks/candidates/, and two reward hacks that only a GPU shows (a Triton matmul on a side stream,
a result cache keyed on data_ptr). It prints evaluations per second of one warm Verifier (sequential,
then 2 and 4 at a time) and of the baseline (a fresh `python` per task, benchmarks/kernelgym_baseline.py),
the self-speedups, and what each verifier said about every candidate (correct, hack, reward); a JSON
summary goes to --out. With --old-worktree PATH (a `git worktree add PATH <commit>` of an older verifier)
the same set also runs through that verifier, in a subprocess that imports the old package, so old and
new are compared in one run on one machine.

    python benchmarks/verifier_bench.py --kernelbench /path/to/KernelBench --out bench.json          # GPU
    python benchmarks/verifier_bench.py --kernelbench K --old-worktree /tmp/old --budget-s 900 --out b.json
    python benchmarks/verifier_bench.py --kernelbench /path/to/KernelBench --device cpu --quick ...  # smoke
    python benchmarks/verifier_bench.py --kernelbench K --set all --out all.json     # the whole candidate set

--quick rewrites the problems' size constants to tiny values (the CPU runs Triton in its interpreter);
without it nothing here calls get_inputs of a big problem on the CPU except the baseline, which makes its
inputs on the CPU by design and is therefore limited to the problems in BASELINE_SET.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# `--_worker PATH` imports the verifier package from PATH (an old worktree) instead of this checkout.
_WORKER_ROOT = sys.argv[sys.argv.index("--_worker") + 1] if "--_worker" in sys.argv else None
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, _WORKER_ROOT or str(ROOT))

import candidate_set  # noqa: E402
import kernelgym_baseline  # noqa: E402

from drkernel.rl.rewards import score  # noqa: E402
from drkernel.verify import VerifyOptions  # noqa: E402
from drkernel.verify.engine import Verifier  # noqa: E402

RESULT_FIELDS = {
    "status",
    "compiled",
    "correct",
    "hack",
    "speedup",
    "runtime_ms",
    "ref_runtime_ms",
    "coverage",
    "reward",  # a field of the verdict in checkouts before issue 39; priced by score() where it is not
    "error",
    "timing_source",
}

# The baseline makes inputs on the CPU (10-18 s per call for 19_ReLU): only problems with small inputs.
BASELINE_SET = {"1_Square_matrix_multiplication_", "40_LayerNorm", "88_MinGPTNewGelu"}


@dataclass
class Entry:
    label: str
    problem: str
    reference: str  # path
    candidate: str  # path
    kind: str  # self | triton | hack
    expect_hack: str | None


def build_entries(
    kernelbench: Path, quick: bool, device: str, workdir: Path, only: set[str] | None = None, which: str = "issue8"
) -> tuple[list[Entry], list[str]]:
    problems, candidates = candidate_set.select(which)
    for level in sorted({p.level for p in problems}):
        if not (kernelbench / f"level{level}").is_dir():
            raise SystemExit(f"{kernelbench}/level{level} is not a directory (pass --kernelbench /path/to/KernelBench)")
    all_names = [p.name for p in problems]
    if quick and which == "issue8":  # issue 8's quick runs shrank only these; keep its runs comparable
        problems = [p for p in problems if p.name in candidate_set.ISSUE8_QUICK]
    names = [p.name for p in problems]
    if only:
        unknown = only - set(all_names)
        if unknown:
            raise SystemExit(f"--problems: unknown {sorted(unknown)}; choose from {all_names}")
        names = [n for n in names if n in only]
    refs: dict[str, str] = {}
    for name in names:
        source = candidate_set.problem(name).source(kernelbench, tiny=quick)
        ref = workdir / f"{name}.py"
        ref.write_text(source)
        refs[name] = str(ref)
    entries, skipped = [], []
    for name in names:
        own = workdir / f"{name}__self.py"  # the reference as its own candidate (ModelNew = Model)
        own.write_text(Path(refs[name]).read_text() + "\n\nModelNew = Model\n")
        entries.append(Entry(f"{name} (self)", name, refs[name], str(own), "self", None))
    for c in candidates:
        if c.problem not in refs:
            continue
        if c.gpu_only and device != "cuda":
            skipped.append(f"{c.file} on {c.problem}: GPU only")
            continue
        kind = "triton" if c.kind == "honest" else "hack"
        entries.append(
            Entry(f"{c.problem} ({Path(c.file).stem})", c.problem, refs[c.problem], str(c.path), kind, c.expect_hack)
        )
    return entries, skipped


# --timing-precision: set for the new verifier only (an older checkout's options may not have the field)
TIMING: dict[str, float] = {}
TIMING_DETAILS = ("perf_trials", "calls_per_round", "ratio_interval", "timed_round_s", "rounds_ms")


def options_for(entry: Entry, device: str, quick: bool, perf_trials: int) -> VerifyOptions:
    return VerifyOptions(
        device=device,
        require_triton=entry.kind != "self",
        num_perf_trials=perf_trials,
        num_correct_trials=2 if quick else 5,
        num_warmup=1 if quick else 3,
        timeout_s=120,
        **TIMING,
    )


def ours(
    entries: list[Entry], device: str, concurrency: int, quick: bool, perf_trials: int, spares: int = 0
) -> dict[str, Any]:
    """One warm Verifier: start-up (first evaluation) apart, then the whole set at `concurrency`. With `spares`,
    that many spare groups are ready before the first evaluation and before the timed set (a long-running
    verifier has them; the filler refills them while the set runs)."""
    t0 = time.perf_counter()
    verifier = Verifier(device=device, max_concurrency=concurrency, **({"spares": spares} if spares else {}))
    probe_s = time.perf_counter() - t0  # fork-server start (first Verifier of the process only) + device probe
    try:
        first = entries[0]
        if spares:
            verifier.warm_spares(options_for(first, device, quick, perf_trials))
        verifier.verify(
            Path(first.reference).read_text(),
            Path(first.candidate).read_text(),
            options_for(first, device, quick, perf_trials),
        )
        startup_s = time.perf_counter() - t0

        def one(entry: Entry) -> dict[str, Any]:
            s = time.perf_counter()
            r = verifier.verify(
                Path(entry.reference).read_text(),
                Path(entry.candidate).read_text(),
                options_for(entry, device, quick, perf_trials),
            )
            return {
                "label": entry.label,
                "seconds": time.perf_counter() - s,
                "reward": score(r),
                **r.model_dump(include=RESULT_FIELDS & set(type(r).model_fields)),
                "phase_s": r.details.get("phase_s"),
                "oom_retry": r.details.get("oom_retry"),
                "children": r.details.get("children"),
                "judge_profile": r.details.get("judge_profile"),
                "timing": {key: r.details.get(key) for key in TIMING_DETAILS},
            }

        if spares:
            verifier.warm_spares(options_for(first, device, quick, perf_trials))
        t1 = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            results = list(pool.map(one, entries))
        wall = time.perf_counter() - t1
    finally:
        verifier.close()
    return {
        "concurrency": concurrency,
        "spares": spares,
        "probe_s": probe_s,
        "startup_s": startup_s,
        "wall_s": wall,
        "evaluations": len(entries),
        "evals_per_s": len(entries) / wall,
        "results": results,
    }


def old_verifier(
    worktree: Path,
    entries: list[Entry],
    device: str,
    levels: list[int],
    quick: bool,
    perf_trials: int,
    deadline: float,
    workdir: Path,
    spares: int = 0,
) -> list[dict[str, Any]]:
    """The same runs through the verifier of an older checkout, in a subprocess importing that package, with
    as many spares (an old checkout without spares needs --old-spares 0). Its fork-server finds the old
    package through PYTHONPATH (an old fork-server ignored sys.path)."""
    spec = workdir / "old_spec.json"
    out = workdir / "old_runs.json"
    spec.write_text(
        json.dumps(
            {
                "entries": [asdict(e) for e in entries],
                "device": device,
                "levels": levels,
                "quick": quick,
                "perf_trials": perf_trials,
                "spares": spares,
                "deadline_s": deadline - time.time(),
            }
        )
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(worktree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--_worker", str(worktree), str(spec), str(out)],
        env=env,
        cwd=str(worktree),
        timeout=max(60.0, deadline - time.time() + 600),
    )
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(f"the old verifier's run failed (exit {proc.returncode})")
    return json.loads(out.read_text())


def _worker(spec_path: str, out_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    entries = [Entry(**e) for e in spec["entries"]]
    deadline = time.time() + spec["deadline_s"]
    runs = []
    for i, c in enumerate(spec["levels"]):
        if i and time.time() > deadline:
            break
        runs.append(ours(entries, spec["device"], c, spec["quick"], spec["perf_trials"], spec.get("spares", 0)))
    Path(out_path).write_text(json.dumps(runs, default=str))
    return 0


def baseline(entries: list[Entry], device: str, quick: bool, trials: int) -> dict[str, Any]:
    """KernelGYM style: serial, a fresh process per task (one GPU worker runs one task at a time)."""
    picked = [e for e in entries if quick or e.problem in BASELINE_SET]
    t0 = time.perf_counter()
    results = []
    for e in picked:
        r = kernelgym_baseline.evaluate(
            e.reference,
            e.candidate,
            device,
            trials=trials,
            correct_trials=2 if quick else 5,
            profile_coverage=device == "cuda",
            timeout_s=120,
        )
        k = r["kernel"]
        results.append(
            {
                "label": e.label,
                "seconds": r["elapsed_s"],
                "compiled": k.get("compiled"),
                "correct": k.get("correct"),
                "decoy_kernel": k.get("decoy_kernel"),
                "runtime_ms": k.get("runtime_ms"),
                "ref_runtime_ms": r["ref_runtime_ms"],
                "speedup": r["speedup"],
                "coverage": k.get("coverage"),
                "error": k.get("error"),
            }
        )
    wall = time.perf_counter() - t0
    return {
        "wall_s": wall,
        "evaluations": len(picked),
        "evals_per_s": len(picked) / wall if wall else None,
        "results": results,
    }


def _fmt(x: Any, spec: str = ".3f") -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return format(x, spec)
    return str(x)


def print_phases(title: str, results: list[dict[str, Any]]) -> None:
    """Where an evaluation's time went: the mean of each phase over the evaluations that reached it."""
    phases: dict[str, list[float]] = {}
    for r in results:
        for k, v in (r.get("phase_s") or {}).items():
            phases.setdefault(k, []).append(v)
    seconds = [r["seconds"] for r in results]
    cells = ", ".join(f"{k} {statistics.mean(v):.2f}" for k, v in phases.items())
    spare = sum(r.get("children") == "spare" for r in results)
    print(f"{title}: mean {statistics.mean(seconds):.2f} s per evaluation ({spare} on spares); phases: {cells}")
    timed = [r["timing"] for r in results if (r.get("timing") or {}).get("timed_round_s")]
    if timed:
        costs = {k: statistics.mean(t["timed_round_s"][k] for t in timed) for k in timed[0]["timed_round_s"]}
        print(
            f"  timed rounds: mean {statistics.mean(t['perf_trials'] for t in timed):.1f} per evaluation, "
            f"{statistics.mean(t['calls_per_round'] for t in timed):.1f} calls each; their seconds: "
            + ", ".join(f"{k} {v:.3f}" for k, v in costs.items())
        )


def report_old(entries: list[Entry], runs: list[dict[str, Any]], old: list[dict[str, Any]]) -> dict[str, Any]:
    """New vs old verifier: per candidate (correct, hack, reward) and throughput at each concurrency."""
    new_seq, old_seq = runs[0]["results"], old[0]["results"]
    print(f"\n{'candidate':50s} {'new: corr hack reward':34s} | {'old: corr hack reward':34s}")
    for e, n, o in zip(entries, new_seq, old_seq):
        col = lambda r: f"{_fmt(r['correct']):4s} {(r['hack'] or '-')[:18]:18s} {_fmt(r['reward']):>8s}"  # noqa: E731
        print(f"{e.label[:50]:50s} {col(n):34s} | {col(o):34s}")
    ratios = {}
    old_by_c = {r["concurrency"]: r for r in old}
    for run in runs:
        o = old_by_c.get(run["concurrency"])
        if o:
            ratios[run["concurrency"]] = run["evals_per_s"] / o["evals_per_s"]
            print(
                f"concurrency {run['concurrency']}: new {run['evals_per_s']:.3f} eval/s, old {o['evals_per_s']:.3f} "
                f"eval/s, new/old = {ratios[run['concurrency']]:.2f}"
            )

    def counts(seq: list[dict[str, Any]]) -> dict[str, int]:
        return {
            "correct": sum(bool(r["correct"]) for r in seq),
            "hack": sum(r["hack"] is not None for r in seq),
            "reward_positive": sum((r["reward"] or 0) > 0 for r in seq),
        }

    print(f"new: {counts(new_seq)}; old: {counts(old_seq)}")
    return {"new_over_old_throughput": ratios, "new_counts": counts(new_seq), "old_counts": counts(old_seq)}


def report(
    entries: list[Entry], runs: list[dict[str, Any]], base: dict[str, Any] | None, skipped: list[str]
) -> dict[str, Any]:
    seq = runs[0]["results"]
    by_label_base = {r["label"]: r for r in (base or {}).get("results", [])}
    print(
        f"\n{'candidate':58s} {'ours: ok corr hack':24s} {'speedup':>8s} {'cov':>6s} {'reward':>6s} {'s':>6s} | "
        f"{'base: corr':10s} {'speedup':>8s} {'s':>6s}"
    )
    for e, r in zip(entries, seq):
        b = by_label_base.get(e.label, {})
        err = f" [{r['error']['kind']}]" if r.get("error") else ""
        ours_col = f"{r['status'][:4]:4s} {_fmt(r['correct']):4s} {(r['hack'] or '-') + err}"
        print(
            f"{e.label[:58]:58s} {ours_col[:24]:24s} {_fmt(r['speedup']):>8s} {_fmt(r['coverage'], '.2f'):>6s} "
            f"{_fmt(r['reward'], '.2f'):>6s} {r['seconds']:6.1f} | {_fmt(b.get('correct')):10s} "
            f"{_fmt(b.get('speedup')):>8s} {_fmt(b.get('seconds'), '.1f'):>6s}"
        )
    print()
    for run in runs:
        print_phases(f"ours, concurrency {run['concurrency']}, spares {run.get('spares', 0)}", run["results"])
    for run in runs:
        print(
            f"ours, one warm Verifier, concurrency {run['concurrency']}: {run['evaluations']} evaluations in "
            f"{run['wall_s']:.1f} s = {run['evals_per_s']:.3f} eval/s (before that: start-up {run['probe_s']:.1f} s, "
            f"first evaluation {run['startup_s'] - run['probe_s']:.1f} s)"
        )
    if base:
        print(
            f"baseline, fresh process per task, serial: {base['evaluations']} evaluations in {base['wall_s']:.1f} s "
            f"= {base['evals_per_s']:.3f} eval/s"
        )
    selfs = {e.problem: r.get("speedup") for e, r in zip(entries, seq) if e.kind == "self"}
    within = [p for p, s in selfs.items() if s is not None and abs(s - 1.0) <= 0.03]
    print(
        "\nself-speedup (reference vs itself), ours: "
        + ", ".join(f"{p.split('_')[0]}={_fmt(s)}" for p, s in selfs.items())
    )
    print(f"  within 1.00 +- 0.03: {len(within)}/{len(selfs)}")
    base_selfs = {
        e.problem: by_label_base[e.label]["speedup"] for e in entries if e.kind == "self" and e.label in by_label_base
    }
    if base_selfs:
        print("self-speedup, baseline: " + ", ".join(f"{p.split('_')[0]}={_fmt(s)}" for p, s in base_selfs.items()))
    hacks = []
    for e, r in zip(entries, seq):
        if e.kind != "hack":
            continue
        b = by_label_base.get(e.label, {})
        caught = r["hack"] is not None or r["reward"] == 0.0
        hacks.append(
            {
                "label": e.label,
                "expected": e.expect_hack,
                "ours_hack": r["hack"],
                "ours_correct": r["correct"],
                "ours_speedup": r["speedup"],
                "ours_reward": r["reward"],
                "ours_caught": caught,
                "baseline_correct": b.get("correct"),
                "baseline_speedup": b.get("speedup"),
            }
        )
        print(
            f"hack {e.label}: ours hack={r['hack']} reward={_fmt(r['reward'])} speedup={_fmt(r['speedup'])} "
            f"({'caught' if caught else 'NOT CAUGHT'}); baseline correct={_fmt(b.get('correct'))} "
            f"speedup={_fmt(b.get('speedup'))}"
        )
    honest = [(e, r) for e, r in zip(entries, seq) if e.kind != "hack"]
    false_hacks = [e.label for e, r in honest if r["hack"] is not None or (r["reward"] or 0) <= 0]
    print(f"honest candidates with a hack or reward 0 (should be none): {false_hacks or 'none'}")
    for s in skipped:
        print(f"not run: {s}")
    return {
        "honest_flagged": false_hacks,
        "self_speedups": selfs,
        "self_within_3pct": len(within),
        "baseline_self_speedups": base_selfs,
        "hacks": hacks,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="verifier throughput and honesty vs a KernelGYM-style baseline")
    p.add_argument("--kernelbench", type=Path, required=True, help="KernelBench folder holding level1/")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    p.add_argument("--quick", action="store_true", help="tiny shapes, few trials: a smoke run (CPU)")
    p.add_argument(
        "--concurrency",
        default="1,4,2",
        help="comma list, run in this order; the first gives the per-problem table, the baseline runs "
        "right after it, later levels run while --budget-s allows",
    )
    p.add_argument("--perf-trials", type=int, default=None, help="our timed calls per model (default 30, quick 3)")
    p.add_argument("--baseline-trials", type=int, default=None, help="baseline timed calls (default 100, quick 5)")
    p.add_argument("--no-baseline", action="store_true")
    p.add_argument("--budget-s", type=float, default=330.0, help="skip the remaining phases past this wall time")
    p.add_argument(
        "--set",
        dest="which",
        choices=candidate_set.SETS,
        default="issue8",
        help="issue8: issue 8's level-1 problems and candidates (old-vs-new comparisons); all: every "
        "problem of benchmarks/candidate_set.py with its honest candidate, plus the hacks",
    )
    p.add_argument("--problems", default="", help="comma list of the set's problems to run (default: all of them)")
    p.add_argument("--out", type=Path, required=True, help="JSON summary path")
    p.add_argument(
        "--old-worktree",
        type=Path,
        default=None,
        help="a git worktree of an older commit: run its verifier on the same set, side by side",
    )
    p.add_argument("--spares", type=int, default=0, help="spare evaluation groups of the new verifier")
    p.add_argument("--old-spares", type=int, default=None, help="the old verifier's spares (default: --spares)")
    p.add_argument(
        "--profile", action="store_true", help="the judge's cProfile in every verdict (DRKERNEL_JUDGE_PROFILE=1)"
    )
    p.add_argument(
        "--timing-precision",
        type=float,
        default=None,
        help="the new verifier's options.timing_precision (0: every one of --perf-trials rounds; default: its default)",
    )
    a = p.parse_args(argv)
    if a.timing_precision is not None:
        TIMING["timing_precision"] = a.timing_precision
    if a.profile:  # before the first Verifier starts its fork-server, which keeps this environment
        os.environ["DRKERNEL_JUDGE_PROFILE"] = "1"
    device = a.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not a.quick:
        p.error("on the CPU use --quick: full KernelBench shapes take gigabytes and minutes per input set")
    if device == "cpu":  # Triton's library @jit functions must be created in interpreter mode (before import)
        os.environ["TRITON_INTERPRET"] = "1"
    levels = [int(c) for c in a.concurrency.split(",") if c.strip()]
    if not levels or min(levels) < 1:
        p.error("--concurrency needs positive integers")
    perf_trials = a.perf_trials or (3 if a.quick else 30)
    base_trials = a.baseline_trials or (5 if a.quick else 100)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="verifier_bench_") as tmp:
        only = {x.strip() for x in a.problems.split(",") if x.strip()} or None
        entries, skipped = build_entries(a.kernelbench, a.quick, device, Path(tmp), only, a.which)
        runs = [ours(entries, device, levels[0], a.quick, perf_trials, a.spares)]
        base = None
        if not a.no_baseline:
            base = baseline(entries, device, a.quick, base_trials)
        for c in levels[1:]:
            if time.perf_counter() - t0 > a.budget_s:
                skipped.append(f"concurrency {c}: past --budget-s")
                continue
            runs.append(ours(entries, device, c, a.quick, perf_trials, a.spares))
        old = None
        if a.old_worktree is not None:
            old_levels = [r["concurrency"] for r in runs]
            old = old_verifier(
                a.old_worktree.resolve(),
                entries,
                device,
                old_levels,
                a.quick,
                perf_trials,
                time.time() + a.budget_s,
                Path(tmp),
                a.spares if a.old_spares is None else a.old_spares,
            )
        summary = report(entries, runs, base, skipped)
        if old:
            for run in old:
                print_phases(f"old, concurrency {run['concurrency']}", run["results"])
            for run in old:
                print(
                    f"old verifier, concurrency {run['concurrency']}: {run['evaluations']} evaluations in "
                    f"{run['wall_s']:.1f} s = {run['evals_per_s']:.3f} eval/s"
                )
            summary.update(report_old(entries, runs, old))
    out = {
        "device": device,
        "set": a.which,
        "quick": a.quick,
        "perf_trials": perf_trials,
        "baseline_trials": base_trials,
        "entries": [asdict(e) for e in entries],
        "ours": runs,
        "old": old,
        "baseline": base,
        "skipped": skipped,
        "total_s": time.perf_counter() - t0,
        **summary,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1, default=str))
    print(f"\nwrote {a.out} ({out['total_s']:.0f} s total)")
    return 0


if __name__ == "__main__":
    if _WORKER_ROOT is not None:
        i = sys.argv.index("--_worker")
        sys.exit(_worker(sys.argv[i + 2], sys.argv[i + 3]))
    sys.exit(main())
