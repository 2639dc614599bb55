"""Does the RL loop learn? The same job twice from one warm start and the same seeds: once with RL, once as a
control that cannot learn (trainer.lr=0, everything else equal), over several seeds.

    TRITON_INTERPRET=1 python benchmarks/learning.py [--seeds 0 1] [--steps 8] [--lr 1e-4] [--out runs/learning]

The warm start is this script's own (the demo is untouched): the tiny recipe's 64-wide Qwen3, SFT (one thread)
on both solutions of `relu` and `scale_shift`, simple and fused, for `--sft-epochs`. The defaults were picked by
sampling the warm start's first turns at the rollout temperature before any run: 160 epochs at temperature 1.0
leave its first answers correct about 60% of the time and fused about 20% (120 epochs: about 6% correct; 240
epochs: always correct, `relu` always the simple kernel). Single-turn episodes (`--turns 1`), so every scored
turn is a first answer. The reward is speed-aware: the verifier models H200 time on CPU (`timing: cpu_model`),
which prices the fused kernels faster (relu: simple 0.5x, fused 1.0x the reference; scale_shift: simple 1.0x,
fused 2.0x), so RL should move both the correct rate and the fused share up.

Both arms validate on the training tasks at step 0 and at the last step with `drkernel eval`'s code (the job's
`val/` metrics: `val/fast@p` is the share of *all* samples that are correct with speedup > p, best turn per
sample), and the job's own per-step rollout metrics are kept (`rollout/correct_rate`, correct share of judged
turns; `rollout/fast1_in_all`, correct and modelled faster, share of judged turns; the job's `rollout/fast1` is
faster among *correct* turns only and is not used here). One Ray cluster serves every run. Prints per arm the
seeds' mean and range, and RL minus control; writes results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from drkernel.config.base import load_config  # noqa: E402
from drkernel.config.tiny_recipe import tiny_recipe_overrides  # noqa: E402
from drkernel.config.train import TrainConfig  # noqa: E402
from drkernel.tasks import library_path  # noqa: E402

KEYS = ("rollout/correct_rate", "rollout/fast1_in_all", "rollout/reward_mean")
VAL_KEYS = ("val/fast@0", "val/fast@1", "val/fast@0/turn1", "val/reward_mean")


def warm_start(root: Path, tasks: list[str], epochs: int) -> list[str]:
    """The experiment's recipe (tiny model, its own SFT checkpoint, made once) as overrides."""
    overrides = [
        *tiny_recipe_overrides(root),
        f"sft.epochs={epochs}",
        "sft.num_threads=1",  # two OpenMP threads spin against each other on a shared 2-core box
        "verifier.options.num_correct_trials=1",
        "verifier.options.measure_performance=true",
        "verifier.options.timing=cpu_model",
        "verifier.options.gpu_profile=h200",
        "verifier.options.timeout_s=120",
    ]
    if not (root / "sft" / "config.json").is_file():
        for name in tasks:
            shutil.copytree(library_path() / name, root / "tasks" / name, dirs_exist_ok=True)
        from drkernel.sft.stage import run_sft_stage

        t0 = time.monotonic()
        run_sft_stage(load_config(TrainConfig, None, overrides), log=lambda _: None)
        print(f"warm start: SFT {epochs} epochs on {', '.join(tasks)} in {time.monotonic() - t0:.0f} s", flush=True)
    return overrides


def run_job(overrides: list[str], out: Path) -> dict:
    """One whole job on the script's Ray cluster; its metric rows (step 0 = the first validation)."""
    from actors.job import TrainJob

    shutil.rmtree(out, ignore_errors=True)
    job = TrainJob(load_config(TrainConfig, None, [*overrides, f"trainer.output_dir={out}"]))
    t0 = time.monotonic()
    try:
        job.setup()
        job.run()
    finally:
        job.cleanup()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {"wall_s": round(time.monotonic() - t0, 1), "rows": rows}


def digest(rows: list[dict], steps: int) -> dict[str, float]:
    """Start and end of one run: validation at step 0 and at the last step, rollout metrics of the first and
    last third of the steps."""
    first = [r for r in rows if r["step"] == 0][0]
    last = [r for r in rows if r["step"] == steps][0]
    trained = [r for r in rows if r["step"] >= 1]
    third = max(1, len(trained) // 3)
    out: dict[str, float] = {}
    for key in VAL_KEYS:
        out[f"{key} start"] = first.get(key, float("nan"))
        out[f"{key} end"] = last.get(key, float("nan"))
    for key in KEYS:
        out[f"{key} first third"] = statistics.mean(r.get(key, 0.0) for r in trained[:third])
        out[f"{key} last third"] = statistics.mean(r.get(key, 0.0) for r in trained[-third:])
    return out


def spread(values: list[float]) -> str:
    return f"{statistics.mean(values):.3f} [{min(values):.3f}, {max(values):.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--samples", type=int, default=4, help="group size n (rollout.samples_per_prompt)")
    ap.add_argument("--groups", type=int, default=2, help="prompt groups per step")
    ap.add_argument("--turns", type=int, default=1, help="1: every sample is a first turn")
    ap.add_argument("--temperature", type=float, default=1.0, help="rollout and validation temperature")
    ap.add_argument("--sft-epochs", type=int, default=160)
    ap.add_argument("--val-samples", type=int, default=4, help="validation samples per task at step 0 and the end")
    ap.add_argument("--tasks", nargs="+", default=["relu", "scale_shift"])
    ap.add_argument("--out", default="runs/learning")
    ap.add_argument("--rl-only", action="store_true", help="skip the control (a quick look at a learning rate)")
    a = ap.parse_args()
    root = Path(a.out).resolve()
    base = warm_start(root / "recipe", a.tasks, a.sft_epochs)
    common = [
        *base,
        f"trainer.total_steps={a.steps}",
        f"trainer.checkpoint_every={a.steps}",
        f"rollout.samples_per_prompt={a.samples}",
        f"rollout.max_turns={a.turns}",
        f"rollout.temperature={a.temperature}",
        f"rollout.groups_per_worker={a.groups}",
        f"queue.groups_per_step={a.groups}",
        "queue.max_staleness=0",  # synchronous: every step's samples come from the weights just pushed
        f"trainer.micro_batch_size={a.samples}",
        f"validation.every_steps={a.steps}",
        f"validation.samples_per_task={a.val_samples}",
        f"validation.tasks=[{','.join(a.tasks)}]",
        "logging.samples_every=1000",
    ]
    import ray
    from ray import serve

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    for attempt in range(10):  # on a swamped box the raylet can miss Ray's fixed 30 s start window
        try:
            ray.init(
                address="local",
                num_cpus=8,
                include_dashboard=False,
                log_to_driver=False,
                runtime_env={"env_vars": {"PYTHONPATH": path}},
            )
            break
        except Exception as e:
            print(f"Ray did not start (attempt {attempt + 1}): {e}", flush=True)
            ray.shutdown()
    else:
        raise SystemExit("Ray did not start in ten attempts")
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    runs: dict[str, dict[int, dict]] = {"rl": {}, "control": {}}
    t0 = time.monotonic()
    try:
        for seed in a.seeds:
            for arm, lr in (("rl", a.lr), ("control", 0.0))[: 1 if a.rl_only else 2]:
                extra = [f"trainer.lr={lr}", f"trainer.seed={seed}", f"rl_data.seed={seed}"]
                result = run_job([*common, *extra, f"policy.http_port={port}"], root / f"seed{seed}-{arm}")
                runs[arm][seed] = {
                    "wall_s": result["wall_s"],
                    **digest(result["rows"], a.steps),
                    "rows": result["rows"],
                }
                d = runs[arm][seed]
                print(
                    f"seed {seed} {arm:7s} ({d['wall_s']:.0f} s): "
                    + ", ".join(f"{k} {d[k]:.3f}" for k in d if k not in ("wall_s", "rows")),
                    flush=True,
                )
    finally:
        serve.shutdown()
        ray.shutdown()
    if a.rl_only:
        return
    keys = [k for k in runs["rl"][a.seeds[0]] if k not in ("wall_s", "rows")]
    print(
        f"\n{len(a.seeds)} seeds, {a.steps} steps, lr {a.lr:g}, n={a.samples}, {a.groups} groups/step, "
        f"{time.monotonic() - t0:.0f} s; mean [min, max] over seeds",
        flush=True,
    )
    table = {}
    for key in keys:
        rl = [runs["rl"][s][key] for s in a.seeds]
        ctl = [runs["control"][s][key] for s in a.seeds]
        diff = [x - y for x, y in zip(rl, ctl, strict=True)]
        table[key] = {"rl": rl, "control": ctl, "rl_minus_control": diff}
        print(f"{key:36s} RL {spread(rl)}  control {spread(ctl)}  RL-control {spread(diff)}", flush=True)
    (root / "results.json").write_text(json.dumps({"args": vars(a), "table": table, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
