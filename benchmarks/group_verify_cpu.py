"""A group of samples of one shipped task through the verifier, old and new side by side on the CPU (issue 38).

An RL step verifies each task's samples together: this sends `--samples` candidates of one task (the task's shipped
Triton solutions in turn, as a policy that has learned the task writes them) to one warm `Verifier` and times the
group after a warm-up evaluation, one at a time and `--concurrency` at a time, under each timing mode. Each variant
runs in its own subprocess that imports the verifier package of its tree (`--old-worktree`, a `git worktree add` of
the commit to compare against, and this checkout), and the variants alternate per repeat, so load on the box moves
both alike. It prints evaluations per second, the new/old ratio per setting, and what each verifier said (correct,
hacks, mean reward priced by `drkernel.rl.rewards.score`).

    git worktree add /tmp/old <commit>
    python benchmarks/group_verify_cpu.py --old-worktree /tmp/old --task layernorm_affine --out group.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def worker(tree: Path, task: str, samples: int, concurrency: int, timing: str, trials: int | None) -> dict[str, Any]:
    """In a subprocess: `tree`'s verifier judges the group; returns the wall time and the verdicts."""
    sys.path.insert(0, str(tree))  # and PYTHONPATH and the working folder: the fork-server children import it too
    from drkernel.rl.rewards import RewardConfig, score
    from drkernel.verify import VerifyOptions
    from drkernel.verify.engine import Verifier

    folder = ROOT / "drkernel" / "tasks" / "library" / task
    reference = (folder / "reference.py").read_text()
    solutions = [p.read_text() for p in sorted(folder.glob("solution_*.py"))]
    group = [solutions[i % len(solutions)] for i in range(samples)]
    options = VerifyOptions(device="cpu", timing=timing, **({"num_correct_trials": trials} if trials else {}))
    with Verifier(device="cpu", max_concurrency=concurrency) as verifier:
        verifier.verify(reference, group[0], options)  # the fork-server's and the interpreter's first calls
        t0 = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            results = list(pool.map(lambda c: verifier.verify(reference, c, options), group))
        wall = time.perf_counter() - t0
    priced = [score(r, RewardConfig()) for r in results]
    rewards = [p if isinstance(p, float) else p.reward for p in priced]  # an older tree's score returned the result
    return {
        "wall_s": wall,
        "correct": sum(r.correct for r in results),
        "hacks": sorted({r.hack for r in results if r.hack}),
        "infra": sum(r.status != "ok" for r in results),
        "mean_reward": statistics.fmean(rewards),
        "phase_s": {
            k: round(statistics.median(r.details.get("phase_s", {}).get(k, 0.0) for r in results), 4)
            for k in ("correctness", "timing", "coverage", "revalidation")
        },
    }


def run_variant(tree: Path, args: argparse.Namespace, concurrency: int, timing: str) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--_worker",
        str(tree),
        "--task",
        args.task,
        "--samples",
        str(args.samples),
        "--concurrency",
        str(concurrency),
        "--timing",
        timing,
        "--correct-trials",
        str(args.correct_trials),
        "--out",
        "-",
    ]
    env = {**os.environ, "PYTHONPATH": str(tree), "TRITON_INTERPRET": "1"}  # children import this tree's package
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout_s, env=env, cwd=tree)
    if done.returncode != 0:
        raise RuntimeError(f"{tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--old-worktree", type=Path, help="a checkout of the verifier to compare against")
    p.add_argument("--task", default="layernorm_affine", help="a folder of drkernel/tasks/library")
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--concurrency", default="1,2", help="comma list of evaluations at once")
    p.add_argument("--timing", default="cpu_model,measured", help="comma list of timing modes")
    p.add_argument(
        "--correct-trials", type=int, default=0, help="num_correct_trials (0: the default; configs/demo_cpu.yaml: 2)"
    )
    p.add_argument("--repeats", type=int, default=2, help="runs of each variant, alternating old and new")
    p.add_argument("--timeout-s", type=float, default=900.0)
    p.add_argument("--out", required=True, help="JSON summary path ('-': stdout only)")
    p.add_argument("--_worker", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args._worker:
        print(
            json.dumps(
                worker(args._worker, args.task, args.samples, int(args.concurrency), args.timing, args.correct_trials)
            )
        )
        return
    trees = {"new": ROOT} | ({"old": args.old_worktree.resolve()} if args.old_worktree else {})
    rows = []
    for timing in args.timing.split(","):
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
            for _ in range(args.repeats):
                for name, tree in sorted(trees.items()):  # new, old, new, old: drift in load hits both
                    runs[name].append(run_variant(tree, args, concurrency, timing))
            row: dict[str, Any] = {"timing": timing, "concurrency": concurrency}
            for name, got in runs.items():
                wall = statistics.median(r["wall_s"] for r in got)
                row[name] = {
                    "evaluations_per_s": args.samples / wall,
                    "wall_s": [round(r["wall_s"], 3) for r in got],
                    **{k: got[-1][k] for k in ("correct", "hacks", "infra", "mean_reward", "phase_s")},
                }
            if "old" in row:
                row["new_over_old"] = row["new"]["evaluations_per_s"] / row["old"]["evaluations_per_s"]
            rows.append(row)
            ratio = f"  new/old {row['new_over_old']:.2f}x" if "old" in row else ""
            print(
                f"{timing:9s} x{concurrency}: "
                + "  ".join(
                    f"{n} {row[n]['evaluations_per_s']:.3f}/s (correct {row[n]['correct']}/{args.samples}, "
                    f"reward {row[n]['mean_reward']:.3f}, hacks {row[n]['hacks'] or 'none'})"
                    for n in trees
                )
                + ratio,
                flush=True,
            )
    summary = {
        "task": args.task,
        "samples": args.samples,
        "repeats": args.repeats,
        "num_correct_trials": args.correct_trials or "default",
        "rows": rows,
    }
    if args.out != "-":
        Path(args.out).write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
