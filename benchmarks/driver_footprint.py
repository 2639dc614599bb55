"""The training driver's memory and the step time, for two checkouts side by side in one run (issue 20:
before, the driver fetched every batch from the queue and put it again for the trainer ranks; after, trainer
rank 0 pulls it and the driver never holds a trajectory).

    python benchmarks/driver_footprint.py --tree before=/tmp/before20 --tree after=. [--steps 4] [--rounds 2]

Each run is `python -m pipelines.train` of the tiny recipe (drkernel/config/tiny_recipe.py: a 64-wide Qwen3
warm-started on two
shipped tasks, real Serve policy and verifier, Triton-interpreter verification) in that checkout, in its own
local Ray. The driver process's resident memory is sampled every 0.2 s (the driver only, not its actors);
step times are the job's own `time/step_s` in metrics.jsonl. Trees alternate, `--rounds` times each, so a
change in the host's load hits both. Prints peak driver RSS and the median step time per tree, and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from drkernel.config.base import load_config  # noqa: E402
from drkernel.config.tiny_recipe import TINY_TASKS, tiny_recipe_overrides  # noqa: E402
from drkernel.config.train import TrainConfig  # noqa: E402
from drkernel.tasks import library_path  # noqa: E402


def recipe(root: Path) -> list[str]:
    """The tiny recipe with its SFT checkpoint (trained once, reused by every run)."""
    overrides = tiny_recipe_overrides(root)
    if not (root / "sft" / "config.json").is_file():
        for name in TINY_TASKS:
            shutil.copytree(library_path() / name, root / "tasks" / name, dirs_exist_ok=True)
        from drkernel.sft.stage import run_sft_stage

        run_sft_stage(load_config(TrainConfig, None, overrides), log=lambda _: None)
    return [*overrides, f"policy.model_path={root / 'sft'}"]


RAY_START_TIMEOUT = "timed out during startup"  # Ray's 30 s raylet wait, crossed on a host loaded far past its cores


def run(tree: Path, overrides: list[str], out: Path, attempts: int = 3) -> dict:
    """One job in `tree`; peak driver RSS and the per-step times it logged. A job whose private Ray did not
    start (the host too loaded) is started again, at most `attempts` times; any other failure raises."""
    attempt = 1
    while True:
        try:
            return _run_once(tree, overrides, out)
        except RuntimeError as e:
            if RAY_START_TIMEOUT not in str(e) or attempt >= attempts:
                raise
            print(f"{tree}: Ray did not start (attempt {attempt}), again", flush=True)
        attempt += 1


def _run_once(tree: Path, overrides: list[str], out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "pipelines.train", *overrides, f"trainer.output_dir={out}"]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    driver = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            peak = max(peak, driver.memory_info().rss)
        except psutil.Error:
            pass
        time.sleep(0.2)
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{tree}: the job failed ({proc.returncode}): {err[-3000:]}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line]
    return {
        "peak_rss_mb": peak / 2**20,
        "step_s": [r["time/step_s"] for r in rows],
        "wall_s": time.monotonic() - t0,
        "load_avg_1m": os.getloadavg()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True, metavar="NAME=DIR", help="a checkout to measure")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="/tmp/driver_footprint")
    a = ap.parse_args()
    trees = {name: Path(path).resolve() for name, path in (t.split("=", 1) for t in a.tree)}
    root = Path(a.out).resolve()
    overrides = [
        *recipe(root / "recipe"),
        f"trainer.total_steps={a.steps}",
        "trainer.checkpoint_every=1000",
        "logging.report_samples_per_step=0",
    ]
    results: dict[str, list[dict]] = {name: [] for name in trees}
    for round_ in range(a.rounds):
        for name, tree in trees.items():
            r = run(tree, overrides, root / f"{name}-{round_}")
            results[name].append(r)
            print(
                f"round {round_} {name:8s}: peak driver RSS {r['peak_rss_mb']:.0f} MB, step s "
                f"{[round(s, 2) for s in r['step_s']]}, wall {r['wall_s']:.0f} s, load {r['load_avg_1m']:.1f}",
                flush=True,
            )
    summary = {}
    for name, runs in results.items():
        summary[name] = {
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
            "median_step_s": statistics.median(s for r in runs for s in r["step_s"]),
        }
        print(
            f"{name:8s}: peak driver RSS {summary[name]['peak_rss_mb']:.0f} MB, median step "
            f"{summary[name]['median_step_s']:.2f} s",
            flush=True,
        )
    names = list(trees)
    if len(names) == 2:
        first, second = (summary[n] for n in names)
        print(
            f"{names[1]}/{names[0]}: driver RSS {second['peak_rss_mb'] / first['peak_rss_mb']:.2f}x, "
            f"median step time {second['median_step_s'] / first['median_step_s']:.2f}x",
            flush=True,
        )
    (root / "results.json").write_text(json.dumps({"runs": results, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
