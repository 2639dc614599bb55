"""`drkernel demo`: the embedded default end to end on a laptop CPU.

    drkernel demo [--steps N] [--out DIR] [KEY=VALUE ...]

1. SFT warm start of the tiny Qwen3 policy on the shipped elementwise tasks, cached under ~/.cache/drkernel
   (keyed by the model, tokenizer, data and SFT settings), so a second demo starts RL at once.
2. Asynchronous multi-turn RL on the same tasks through the real job (actors/job.py): policy and verifier
   on Ray Serve, rollout workers, staleness queue, trainer, weight pushes; Triton-interpreter verification.
3. DIR/summary.json, PNG plots (reward, correctness and Fast@1, staleness, throughput) and a short summary.

On CPU the demo's verifier prices each kernel's counted work on a GPU profile (`timing: cpu_model`), so
speedups are modelled, not measured; the summary says which timing produced them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

from drkernel.config.train import TrainConfig
from pipelines.cli import UsageError
from pipelines.train import load_train_config

REPO = Path(__file__).resolve().parents[1]
DEMO_CONFIG = REPO / "configs" / "demo_cpu.yaml"
# The demo's own sizing on top of configs/demo_cpu.yaml. It trains and prompts on the elementwise tasks only:
# 400 SFT steps take the tiny model to about 0.005 loss on them (73-87 % of first answers sampled at
# temperature 1.0 correct), where 120 steps over the whole library left nothing that compiled, so every RL reward was 0
# (BENCHMARKS.md, the demo). Feedback turns teach the second turn of an episode (without them it held no code).
# SFT runs on one thread: on a 2-core box shared with other work, two OpenMP threads wait on each other and a
# step took 8x longer.
DEMO_DEFAULTS = [
    "data.categories=[elementwise]",
    "data.feedback_turns=true",
    "sft.epochs=60",
    "sft.max_steps=400",
    "sft.num_threads=1",
    "sft.eval.enabled=false",
    "sft.log_every=20",
    "trainer.total_steps=6",
]
WALL_NOTE = (
    "CPU: speedups are Triton-interpreter wall clock against eager PyTorch, so every kernel is far "
    "slower than its reference and Fast@1 is 0 by construction; the reward's speed term is not "
    "informative here (verifier.options.timing=cpu_model models it instead)."
)
MODEL_NOTE = (
    "CPU: speedups are modelled (timing_source cpu_model): each kernel's counted bytes, flops and launches "
    "priced on the {profile} profile against eager PyTorch's operators priced the same way. A proxy for GPU "
    "speed, not a measurement (README, CPU cost model)."
)


def cpu_note(cfg: TrainConfig) -> str:
    """What the demo's speedups are, from the timing its verifier actually uses."""
    options = cfg.verifier.options
    return MODEL_NOTE.format(profile=options.gpu_profile) if options.timing == "cpu_model" else WALL_NOTE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=int, default=None, help="RL steps (default 6)")
    parser.add_argument("--out", default="runs/demo", help="output folder (summary.json, plots, checkpoints)")
    parser.add_argument("--config", default=None, help=f"base recipe (default {DEMO_CONFIG.relative_to(REPO)})")
    parser.add_argument(
        "--sft-cache", default=None, help="folder of cached SFT checkpoints (default ~/.cache/drkernel/demo-sft)"
    )
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. rollout.max_turns=1")


def sft_cache_dir(cfg: TrainConfig, root: Path) -> Path:
    """Where the SFT checkpoint of these settings lives: a hash of everything that shapes it."""
    shaping = {k: cfg.model_dump(mode="json")[k] for k in ("model", "tokenizer", "data", "sft")}
    shaping["sft"].pop("output_dir", None)
    shaping["model"].pop("output_dir", None)
    digest = hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:16]
    return root / digest


def demo_config(args: argparse.Namespace) -> TrainConfig:
    if args.steps is not None and args.steps < 1:
        raise UsageError("drkernel demo: --steps must be at least 1")
    base = args.config or (str(DEMO_CONFIG) if DEMO_CONFIG.is_file() else None)
    out = Path(args.out)
    overrides = [*DEMO_DEFAULTS, f"trainer.output_dir={out / 'train'}", *args.overrides]
    if args.steps is not None:
        overrides.append(f"trainer.total_steps={args.steps}")
    cfg = load_train_config(base, overrides, "drkernel demo")
    cache = Path(args.sft_cache or Path.home() / ".cache" / "drkernel" / "demo-sft")
    where = sft_cache_dir(cfg, cache)
    return load_train_config(
        base, [*overrides, f"sft.output_dir={where}", f"model.output_dir={where}-base"], "drkernel demo"
    )


def write_summary(summary: dict, out: Path, note: str) -> dict:
    from drkernel.train.plots import write_plots

    rows = [json.loads(line) for line in (out / "train" / "metrics.jsonl").read_text().splitlines() if line]
    plots = write_plots(rows, out)
    keep = (
        "steps",
        "policy_versions",
        "reward_mean_per_step",
        "correct_rate_per_step",
        "fast1_per_step",
        "max_staleness_observed",
        "trajectories",
        "verifier_calls",
        "tokens_per_s",
        "wall_s",
    )
    result = {k: summary[k] for k in keep} | {"plots": [p.name for p in plots], "note": note}
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    return result


def run(args: argparse.Namespace) -> int:
    cfg = demo_config(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from actors.job import TrainJob  # heavy imports only after the config is known good

    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    summary = TrainJob(cfg, address=None).main()
    result = write_summary(summary, out, cpu_note(cfg))
    rewards = result["reward_mean_per_step"]
    print(
        f"demo: {result['steps']} RL steps, {result['policy_versions']} weight pushes, "
        f"{result['trajectories']} trajectories, {result['verifier_calls']} verifier calls, "
        f"{result['tokens_per_s']:.0f} generated tok/s, {result['wall_s']:.0f} s"
    )
    if rewards:
        print(
            f"demo: mean reward first step {rewards[0]:.3f}, last step {rewards[-1]:.3f}; "
            f"max staleness {result['max_staleness_observed']}"
        )
    print(f"demo: {result['note']}")
    print(f"demo: wrote {out / 'summary.json'} and {', '.join(result['plots'])} in {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from pipelines.cli import main as cli_main

    return cli_main(["demo", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
