"""`drkernel train` / `python -m pipelines.train`: the asynchronous RL job (Ray actors + Serve apps).

    python -m pipelines.train --config configs/demo_cpu.yaml trainer.total_steps=2
    RAY_AUTH_MODE=token ray job submit --working-dir . --runtime-env runtime_env.yaml -- \\
        python -m pipelines.train --config configs/demo_cpu.yaml trainer.total_steps=2

Each run writes into its own run folder, printed at start and end: --output-dir, else a new folder under
~/drkernel-runs (never Ray's temporary copy of the working dir); `--resume RUN_FOLDER` continues one.
The config is validated before Ray starts (unknown keys and bad values fail naming the key; `--dry-run`
prints the resolved config as JSON and the per-device memory estimate, and exits). A recipe whose estimate
exceeds `hardware.device_memory_gib` or `hardware.devices` is refused before Ray starts, naming the numbers.
Under `ray job submit` the driver joins the job's cluster (RAY_ADDRESS is set for it); otherwise it starts a
private local cluster, never attaching to a stranger's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from drkernel.config.base import ConfigError, load_config
from drkernel.config.train import TrainConfig
from drkernel.train.memory_estimate import estimate_memory, shape_differences
from pipelines.cli import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=None, help="YAML recipe, e.g. configs/demo_cpu.yaml")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the resolved config as JSON (stdout) and the per-device memory estimate (stderr), then exit",
    )
    parser.add_argument(
        "--output-dir",
        default=None,
        help="the run folder, on storage every node shares (default: a new one under ~/drkernel-runs)",
    )
    parser.add_argument(
        "--resume",
        nargs="?",
        const="",
        default=None,
        metavar="RUN_FOLDER",
        help="continue the run in RUN_FOLDER (alone: in --output-dir / trainer.output_dir) from its latest "
        "checkpoint (same step, version, cursor)",
    )
    parser.add_argument(
        "--no-sft",
        action="store_true",
        help="fail instead of running the SFT warm start when this config's SFT checkpoint does not exist yet",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="also show Serve's per-request access lines and library notices (logging.verbose=true)",
    )
    parser.add_argument(
        "--address",
        default=None,
        help="Ray cluster to join (default: $RAY_ADDRESS under `ray job submit`, else a new local one)",
    )
    parser.add_argument(
        "overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. queue.max_staleness=0"
    )


def load_train_config(path: str | None, overrides: list[str], prog: str) -> TrainConfig:
    try:
        return load_config(TrainConfig, path, overrides)
    except ConfigError as e:
        raise UsageError(f"{prog}: {e}") from None


def check_model_shape(cfg: TrainConfig) -> None:
    """Refuse a hardware.model that is not the shape of the policy folder the job would load (when it exists
    here): the memory estimate would be of another model."""
    if cfg.hardware.model is None or cfg.policy.model_path is None:
        return
    found = Path(cfg.policy.model_path) / "config.json"
    if not found.is_file():
        return
    try:
        hf = json.loads(found.read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"drkernel train: cannot read {found}: {e}") from None
    wrong = shape_differences(cfg.hardware.model, hf)
    if wrong:
        raise UsageError(f"drkernel train: hardware.model is not the shape of {found}: {'; '.join(wrong)}")


def run_overrides(args: argparse.Namespace) -> list[str]:
    """The command line's overrides plus the run folder that --output-dir or --resume RUN_FOLDER names."""
    if args.output_dir and args.resume:
        raise UsageError("drkernel train: give the run folder once: --resume RUN_FOLDER or --output-dir, not both")
    folder = args.resume or args.output_dir
    return [*args.overrides, f"trainer.output_dir={folder}"] if folder else list(args.overrides)


def run(args: argparse.Namespace) -> int:
    overrides = [*run_overrides(args), *(["logging.verbose=true"] if args.verbose else [])]
    cfg = load_train_config(args.config, overrides, "drkernel train")
    check_model_shape(cfg)
    estimate = estimate_memory(cfg)
    if args.dry_run:
        print(json.dumps(cfg.model_dump(mode="json"), indent=2))
        print(estimate.report(), file=sys.stderr)
    if estimate.problems():
        raise UsageError(f"drkernel train: the recipe does not fit: {'; '.join(estimate.problems())}")
    if args.dry_run:
        return 0
    from actors.job import TrainJob  # Ray, torch, transformers: config known good
    from actors.job_stop import JobStalled, JobUnschedulable
    from drkernel.sft.warm_start import SFTRequired
    from drkernel.train.scheduling import ClusterTooSmall
    from pipelines.report import write_report

    job = TrainJob(
        cfg, resume=args.resume is not None, address=args.address, allow_sft=not args.no_sft, on_report=write_report
    )
    try:
        summary = job.main()
    except SFTRequired as e:
        raise UsageError(f"drkernel train: {e}") from None
    except (ClusterTooSmall, JobUnschedulable, JobStalled) as e:  # said in one line; the report has the rest
        print(f"drkernel train: {type(e).__name__}: {e}", file=sys.stderr)
        if job.out.exists():
            print(f"drkernel train: report {job.out / 'report.html'}", file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=2, default=str))
    print(f"drkernel train: report {job.out / 'report.html'}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    from pipelines.cli import main as cli_main

    return cli_main(["train", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
