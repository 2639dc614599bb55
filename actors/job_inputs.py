"""What a training job starts from: its config with every path absolute, its policy weights (the SFT warm start,
run as a Ray task with a trainer rank's resources when this config has none yet) and its prompt pool."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import ray

from drkernel.config.train import TrainConfig
from drkernel.log import get_logger, setup_logging
from drkernel.placement import ray_options, resolve_kind
from drkernel.train.run_folder import inside_run

log = get_logger("train")


@ray.remote(max_retries=0)
def _sft_task(config: dict[str, Any]) -> str:
    """The SFT warm start where a trainer rank would run; returns the node it ran on."""
    from drkernel.sft.stage import run_sft_stage

    cfg = TrainConfig.model_validate(config)
    setup_logging(cfg.logging.json_logs or None)
    run_sft_stage(cfg, log=log.info)
    return ray.get_runtime_context().get_node_id()


def resolve_model_path(cfg: TrainConfig, allow_sft: bool = True, on_cluster: bool = False) -> tuple[str, float]:
    """(model folder, seconds spent on SFT): policy.model_path, else the SFT checkpoint of this config, made
    first when missing, after saying what that costs (or refusing, `allow_sft=False`). `on_cluster` (the job,
    once Ray is up): the warm start runs as a Ray task with a trainer rank's resources, never on the head
    node's driver; else it runs here. A lock beside the checkpoint lets concurrent jobs of one config make it
    once."""
    if cfg.policy.model_path:
        if not (Path(cfg.policy.model_path) / "config.json").is_file():
            raise FileNotFoundError(f"policy.model_path {cfg.policy.model_path} holds no HF model (config.json)")
        return cfg.policy.model_path, 0.0
    from filelock import FileLock

    from drkernel.sft.warm_start import SFTRequired, is_complete, plan_sft

    sft_dir = Path(cfg.sft.output_dir)
    if is_complete(sft_dir):
        log.info("policy: the SFT checkpoint of this config, %s (no SFT needed)", sft_dir)
        return str(sft_dir), 0.0
    plan = plan_sft(cfg)
    if not allow_sft:
        raise SFTRequired(
            f"policy.model_path is unset and this config's SFT checkpoint {sft_dir} does not exist; --no-sft refuses "
            f"to make it ({plan.steps} steps). Make it first with `drkernel sft` and the same config, or set "
            "policy.model_path=<an HF model folder>"
        )
    sft_dir.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{sft_dir}.lock"):
        if is_complete(sft_dir):  # another job of this config made it while this one waited
            return str(sft_dir), 0.0
        log.warning("no SFT checkpoint of this config yet: %s", plan.describe())
        log.warning("to stop instead: Ctrl-C or `ray job stop`; `--no-sft` refuses; policy.model_path skips SFT")
        t0 = time.monotonic()
        if on_cluster:
            tc = cfg.trainer
            kind = resolve_kind(tc.device, ray.cluster_resources(), "trainer.device")
            options = ray_options(kind, tc.cpus_per_worker, tc.accelerators_per_worker)
            node = ray.get(_sft_task.options(**options).remote(cfg.model_dump(mode="json")))
            log.info("SFT warm start done on node %s", node[:12])
        else:
            from drkernel.sft.stage import run_sft_stage

            run_sft_stage(cfg, log=log.info)
        return str(sft_dir), time.monotonic() - t0


def prompt_file(cfg: TrainConfig) -> str:
    """rl_data.prompt_file, else the task folder's pool in rl_data.prompt_style (the SFT warm start's style)."""
    if cfg.rl_data.prompt_file:
        return cfg.rl_data.prompt_file
    from drkernel.tasks.prompt_pool import build_prompt_pool

    cats = cfg.data.categories
    out = Path(cfg.trainer.output_dir) / f"prompts-{'-'.join([cfg.rl_data.prompt_style, *(cats or [])])}.parquet"
    if not out.is_file():
        build_prompt_pool(out, cfg.data.tasks_dir, cfg.rl_data.prompt_style, categories=cats)
    return str(out)


def absolute_paths(cfg: TrainConfig, run_folder: Path) -> TrainConfig:
    """The config with every path absolute (actors and replicas do not run in the driver's cwd): the run
    folder as trainer.output_dir, the stages' relative outputs inside it, inputs against the cwd."""
    data = cfg.model_dump()
    data["trainer"]["output_dir"] = str(run_folder)
    for section, key in (("sft", "output_dir"), ("model", "output_dir")):
        if data[section][key]:  # unset: the config's SFT cache folder (with_sft_paths)
            data[section][key] = inside_run(data[section][key], run_folder)
    for section, key in (
        ("policy", "model_path"),
        ("rl_data", "prompt_file"),
        ("sft", "base_model"),
        ("data", "tasks_dir"),
        ("data", "sft_file"),
    ):
        if data[section].get(key):
            data[section][key] = str(Path(data[section][key]).expanduser().resolve())
    return TrainConfig.model_validate(data)
