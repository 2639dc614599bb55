"""Validation inside training: the current policy on held-out tasks, measured by the evaluation's own code.

The numbers are `drkernel eval`'s (drkernel.eval.metrics), flattened under `val/` for the job's metrics.jsonl,
TensorBoard and plots: `val/fast@p` (best over the turns, share of all samples), `val/fast@p/turn<t>`,
`val/correct_rate`, `val/compile_rate`, `val/reward_mean`, `val/hack_rate`, `val/pass@1`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from drkernel.config.eval import EvalConfig, ValidationConfig
from drkernel.config.train import RolloutConfig
from drkernel.eval.episodes import EpisodeSettings, run_task
from drkernel.eval.metrics import summarize
from drkernel.eval.runner import episode_config
from drkernel.rl.rewards import RewardConfig
from drkernel.rollout.episode import GenerateFn, VerifyFn
from drkernel.types.task_row import TaskRow

PREFIX = "val/"


def flat_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """The summary's scalars as `val/...` floats (the job's metric sinks take flat numbers)."""
    out = {f"{PREFIX}{k}": float(v) for k, v in summary["best"].items()}
    for t, row in enumerate(summary["per_turn"], start=1):
        out.update({f"{PREFIX}{k}/turn{t}": float(v) for k, v in row.items()})
    for key in ("correct_rate", "compile_rate", "format_rate", "reward_mean", "hack_rate", "samples_errored"):
        out[f"{PREFIX}{key}"] = float(summary[key])
    out.update({f"{PREFIX}{k}": float(v) for k, v in summary["at_k"].items()})
    return out


async def validate(
    tasks: list[tuple[str, TaskRow]],
    generate: GenerateFn,
    verify: VerifyFn,
    tokenizer: Any,
    rollout: RolloutConfig,
    reward_cfg: RewardConfig,
    vcfg: ValidationConfig,
    tasks_at_once: int = 4,
) -> dict[str, float]:
    """Every held-out task's samples through the rollout's episode loop, summarised as flat `val/` metrics."""
    ev = EvalConfig(samples_per_task=vcfg.samples_per_task, max_turns=vcfg.max_turns, temperature=vcfg.temperature)
    cfg = episode_config(rollout, ev)
    slots = asyncio.Semaphore(tasks_at_once)
    settings = EpisodeSettings(verify, tokenizer, cfg, reward_cfg)

    async def one(name: str, row: TaskRow) -> list:
        async with slots:
            return await run_task(row, name, ev.samples_per_task, generate, settings)

    per_task = await asyncio.gather(*(one(name, row) for name, row in tasks))
    return flat_metrics(summarize([r for records in per_task for r in records], ev.fast_p, (1,)))
