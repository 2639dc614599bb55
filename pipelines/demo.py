"""`drkernel demo`: the embedded default end to end on a laptop CPU.

    drkernel demo [--steps N] [--out DIR] [KEY=VALUE ...]

1. SFT warm start of the tiny Qwen3 policy on the shipped elementwise tasks (configs/demo.yaml), cached under
   ~/.cache/drkernel/sft (keyed by the model, tokenizer, data and SFT settings), so a second demo, and any
   training job on configs/demo.yaml, starts RL at once.
2. Asynchronous multi-turn RL on the same tasks through the real job (actors/job.py): policy and verifier
   on Ray Serve, rollout workers, staleness queue, trainer, weight pushes; Triton-interpreter verification.
3. DIR/summary.json, PNG plots (reward, correctness and Fast@1, staleness, throughput), a short summary, and
   DIR/train/report.html (pipelines/report.py): the run's table, plots and a browser of its trajectories.

On CPU the demo's verifier prices each kernel's counted work on a GPU profile (`timing: cpu_model`), so
speedups are modelled, not measured; the summary says which timing produced them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from drkernel.config.train import TrainConfig
from drkernel.sft.warm_start import CACHE_ENV, with_sft_paths
from pipelines.cli import UsageError
from pipelines.train import load_train_config

REPO = Path(__file__).resolve().parents[1]
DEMO_CONFIG = REPO / "configs" / "demo.yaml"  # the demo's sizing (elementwise tasks, 400 SFT steps, 6 RL steps)
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
    parser.add_argument("--config", default=None, help=f"recipe (default {DEMO_CONFIG.relative_to(REPO)})")
    parser.add_argument(
        "--sft-cache",
        default=None,
        help=f"folder of cached SFT checkpoints (default ~/.cache/drkernel/sft, ${CACHE_ENV})",
    )
    parser.add_argument(
        "--no-sft", action="store_true", help="fail instead of making the SFT warm start when not cached"
    )
    parser.add_argument("--verbose", action="store_true", help="also show Serve's access lines and library notices")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. rollout.max_turns=1")


def demo_config(args: argparse.Namespace) -> TrainConfig:
    if args.steps is not None and args.steps < 1:
        raise UsageError("drkernel demo: --steps must be at least 1")
    base = args.config or str(DEMO_CONFIG)
    out = Path(args.out)
    overrides = [f"trainer.output_dir={out / 'train'}", *args.overrides]
    if args.verbose:
        overrides.append("logging.verbose=true")
    if args.steps is not None:
        overrides.append(f"trainer.total_steps={args.steps}")
    cfg = load_train_config(base, overrides, "drkernel demo")
    return with_sft_paths(cfg, Path(args.sft_cache).expanduser().resolve() if args.sft_cache else None)


def write_summary(summary: dict, out: Path, cfg: TrainConfig) -> dict:
    """DIR/summary.json (the job's figures a reader wants, plus what its speedups are) and the run's plots in DIR."""
    from drkernel.rl.rewards import reward_range
    from drkernel.train.plots import write_plots
    from drkernel.train.report import speed_source

    rows = [json.loads(line) for line in (out / "train" / "metrics.jsonl").read_text().splitlines() if line]
    plots = write_plots(rows, out, out.name, reward_range(cfg.algorithm.reward), speed_source(cfg))
    keep = (
        "steps",
        "policy_versions",
        "reward_mean_per_step",
        "correct_rate_per_step",
        "fast1_per_step",
        "speedup_correct_median_per_step",
        "max_staleness_observed",
        "trajectories",
        "verifier_calls",
        "tokens_per_s_per_step",
        "tokens_per_s_rl_loop",
        "tokens_per_s_end_to_end",
        "wall_s",
        "sft_wall_s",
        "commit",
        "config_digest",
        "output_dir",
    )
    result = {k: summary[k] for k in keep} | {"plots": [p.name for p in plots], "note": cpu_note(cfg)}
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    return result


def run(args: argparse.Namespace) -> int:
    cfg = demo_config(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from actors.job import TrainJob  # heavy imports only after the config is known good

    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    from drkernel.sft.warm_start import SFTRequired
    from pipelines.report import write_report

    job = TrainJob(cfg, address=None, allow_sft=not args.no_sft, on_report=write_report)
    try:
        summary = job.main()
    except SFTRequired as e:
        raise UsageError(f"drkernel demo: {e}") from None
    except BaseException:
        if (job.out / "report.html").is_file():
            print(f"demo: the run ended early; its report: {job.out / 'report.html'}", file=sys.stderr)
        raise
    result = write_summary(summary, out, cfg)
    rewards = result["reward_mean_per_step"]
    print(
        f"demo: {result['steps']} RL steps, {result['policy_versions']} weight pushes, "
        f"{result['trajectories']} trajectories, {result['verifier_calls']} verifier calls, "
        f"{result['tokens_per_s_rl_loop']:.0f} generated tok/s in RL ({result['tokens_per_s_end_to_end']:.0f} end to "
        f"end), {result['wall_s']:.0f} s ({result['sft_wall_s']:.0f} s of SFT)"
    )
    if rewards:
        print(
            f"demo: mean reward first step {rewards[0]:.3f}, last step {rewards[-1]:.3f}; "
            f"max staleness {result['max_staleness_observed']}"
        )
    print(f"demo: {result['note']}")
    print(f"demo: summary {out / 'summary.json'}")
    print(f"demo: plots {', '.join(str(out / p) for p in result['plots'])}")
    print(f"demo: report {job.out / 'report.html'} (open it in a browser: trajectories, kernels, feedback, verdicts)")
    return 0


def main(argv: list[str] | None = None) -> int:
    from pipelines.cli import main as cli_main

    return cli_main(["demo", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
