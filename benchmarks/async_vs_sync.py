"""Asynchronous vs synchronous RL at equal hardware, data and steps, side by side in one run.

    python benchmarks/async_vs_sync.py [--steps 4] [--latency-s 0 2] [--out runs/async_bench]

Each pair runs the whole job (tests/e2e's tiny recipe: a 64-wide Qwen3 warm-started on two shipped tasks,
real Serve policy and verifier, real Triton-interpreter verification) with queue.max_staleness=0
(synchronous: no rollout for version v+1 starts before step v is trained and pushed) and =1 (asynchronous),
once per injected verifier latency (the benchmark-only `verifier.injected_latency_s`, a sleep before every
verdict, standing in for a slow GPU verifier). Prints the RL loop's time (setup apart) and generated tokens/s of
each run, the load average, and the async/sync ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


from drkernel.config.base import load_config  # noqa: E402
from drkernel.config.tiny_recipe import TINY_TASKS as TASKS  # noqa: E402
from drkernel.config.tiny_recipe import tiny_recipe_overrides as recipe_overrides  # noqa: E402
from drkernel.config.train import TrainConfig  # noqa: E402
from drkernel.tasks import library_path  # noqa: E402


def recipe(root: Path) -> list[str]:
    """The tiny recipe with its SFT checkpoint (trained once, reused)."""
    overrides = recipe_overrides(root)
    if not (root / "sft" / "config.json").is_file():
        for name in TASKS:
            shutil.copytree(library_path() / name, root / "tasks" / name, dirs_exist_ok=True)
        from drkernel.sft.stage import run_sft_stage

        run_sft_stage(load_config(TrainConfig, None, overrides), log=lambda _: None)
    return overrides


def run(overrides: list[str], out: Path) -> dict:
    """One whole job; the RL loop is timed apart from setup (Ray, Serve apps, model loads: the same in both
    modes, and on a 2-core box long enough to hide the difference between them)."""
    from actors.job import TrainJob

    shutil.rmtree(out, ignore_errors=True)
    job = TrainJob(load_config(TrainConfig, None, [*overrides, f"trainer.output_dir={out}"]))
    t0 = time.monotonic()
    try:
        job.setup()
        t1 = time.monotonic()
        job.run()
        t2 = time.monotonic()
    finally:
        job.cleanup()
    summary = job.summary(time.monotonic() - t0)
    tokens = sum(r.get("rollout/tokens", 0.0) for r in job.history)
    return {
        "wall_s": t2 - t0,
        "setup_s": t1 - t0,
        "loop_s": t2 - t1,
        "tokens": tokens,
        "tokens_per_s": tokens / (t2 - t1),
        "steps": summary["steps"],
        "max_staleness": summary["max_staleness_observed"],
        "load_avg_1m": os.getloadavg()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--latency-s", type=float, nargs="+", default=[0.0, 2.0])
    ap.add_argument("--out", default="runs/async_bench")
    a = ap.parse_args()
    root = Path(a.out).resolve()
    overrides = recipe(root / "recipe")
    common = [
        *overrides,
        f"trainer.total_steps={a.steps}",
        "trainer.checkpoint_every=1000",
        "rollout.groups_per_worker=4",
        "queue.groups_per_step=2",
    ]
    results = []
    for latency in a.latency_s:
        pair = {}
        for mode, eta in (("sync", 0), ("async", 1)):
            pair[mode] = run(
                [*common, f"queue.max_staleness={eta}", f"verifier.injected_latency_s={latency}"],
                root / f"{mode}-{latency}",
            )
            r = pair[mode]
            print(
                f"latency {latency:.1f} s {mode:5s}: RL loop {r['loop_s']:.1f} s (setup {r['setup_s']:.1f} s), "
                f"{r['tokens_per_s']:.1f} tok/s, max staleness {r['max_staleness']}, "
                f"load {r['load_avg_1m']:.2f}",
                flush=True,
            )
        ratio = pair["sync"]["loop_s"] / pair["async"]["loop_s"]
        print(
            f"latency {latency:.1f} s: async speedup of the RL loop {ratio:.2f}x, tokens/s ratio "
            f"{pair['async']['tokens_per_s'] / pair['sync']['tokens_per_s']:.2f}x",
            flush=True,
        )
        results.append({"latency_s": latency, **pair, "async_loop_speedup": ratio})
    (root / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
