"""`drkernel sft`: the cold-start SFT stage (tiny model on CPU by default, any HF model on GPU/NPU)."""

from __future__ import annotations

import argparse
import json

from drkernel.config.base import ConfigError, load_config
from drkernel.config.train import TrainConfig
from pipelines.cli import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=None, help="YAML recipe, e.g. configs/demo_cpu.yaml")
    parser.add_argument(
        "--evaluate-only",
        metavar="CHECKPOINT",
        default=None,
        help="skip training: sample and verify one answer per task with this HF checkpoint",
    )
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. sft.epochs=3")


def run(args: argparse.Namespace) -> int:
    try:
        cfg = load_config(TrainConfig, args.config, args.overrides)
    except ConfigError as e:
        raise UsageError(f"drkernel sft: {e}") from None
    from drkernel.sft.stage import SFTInputError, evaluate_checkpoint, run_sft_stage  # heavy imports after validation
    from drkernel.tasks import TaskError

    try:
        summary = evaluate_checkpoint(cfg, args.evaluate_only) if args.evaluate_only else run_sft_stage(cfg)
    except (SFTInputError, TaskError) as e:
        raise UsageError(f"drkernel sft: {e}") from None
    brief = {k: v for k, v in summary.items() if k not in ("config", "dropped_examples", "eval_config")}
    print(json.dumps(brief, indent=2))
    return 0
