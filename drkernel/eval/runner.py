"""The evaluation loop over tasks: a few tasks at once, each task's record stored the moment it finishes.

`generate` and `verify` are injected (the Ray layer passes the policy and verifier deployments, or an HTTP chat
endpoint), as for the episode. Tasks already in the store are skipped, so a stopped run resumes where it was;
`limit` stops after that many new tasks, so a long evaluation can be cut into chunks that fit a time budget.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from drkernel.config.eval import EvalConfig
from drkernel.config.train import RolloutConfig
from drkernel.eval.episodes import EpisodeSettings, run_task
from drkernel.eval.store import RecordStore
from drkernel.rl.rewards import RewardConfig
from drkernel.rollout.episode import GenerateFn, VerifyFn
from drkernel.types.task_row import TaskRow


def episode_config(rollout: RolloutConfig, ev: EvalConfig | Any) -> RolloutConfig:
    """The rollout's episode settings with the evaluation's turns and temperature (when it sets them)."""
    update: dict[str, Any] = {"samples_per_prompt": ev.samples_per_task}
    if ev.max_turns is not None:
        update["max_turns"] = ev.max_turns
    if ev.temperature is not None:
        update["temperature"] = ev.temperature
    return RolloutConfig.model_validate(rollout.model_dump() | update)


async def evaluate_tasks(
    tasks: list[tuple[str, TaskRow]],
    store: RecordStore,
    generate_for: Callable[[str, TaskRow], GenerateFn],
    verify: VerifyFn,
    tokenizer: Any,
    cfg: RolloutConfig,
    reward_cfg: RewardConfig,
    ev: EvalConfig,
    limit: int | None = None,
    on_task: Callable[[str], None] = lambda _: None,
) -> int:
    """Run the tasks the store lacks (at most `limit`), `ev.tasks_at_once` at a time; returns how many ran.
    `generate_for(name, row)` is the task's policy (the same one for a model; fixed answers differ per task)."""
    todo = [(name, row) for name, row in tasks if name not in store.done][:limit]
    slots = asyncio.Semaphore(ev.tasks_at_once)
    settings = EpisodeSettings(verify, tokenizer, cfg, reward_cfg, ev.rounds, ev.sample_timeout_s)

    async def one(name: str, row: TaskRow) -> None:
        async with slots:
            records = await run_task(row, name, ev.samples_per_task, generate_for(name, row), settings)
        store.add(name, records)
        on_task(name)

    jobs = [asyncio.create_task(one(name, row)) for name, row in todo]
    try:
        await asyncio.gather(*jobs)
    finally:
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
    return len(todo)
