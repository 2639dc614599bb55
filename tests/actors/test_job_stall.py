"""No silent stall: the job's own loop (TrainJob._run) on real actors, fed by a policy that serves an old
version, so every finished group is dropped as stale. The job logs why with the counts, then stops. Batches
reach the trainer the way they do in a run: its rank 0 (a real one, on a tiny model) polls the queue."""

from __future__ import annotations

import asyncio
import logging

import pytest
import ray
from rollout_support import FakePolicy, SlowVerifier, tiny_checkpoint, toy_episode, write_pool

from actors.prompt_source import PromptSource
from actors.rollout_pool import RolloutPool, worker_factory
from actors.trainer import create_trainer_group
from actors.trajectory_queue import TrajectoryQueue
from drkernel.config.base import load_config
from drkernel.config.train import RolloutConfig, TrainConfig


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_job_whose_groups_are_all_stale_says_why_and_stops(ray_cluster, tmp_path):
    from actors.job import JobStalled, TrainJob

    cfg = load_config(
        TrainConfig,
        None,
        [
            f"trainer.output_dir={tmp_path / 'run'}",
            "queue.max_staleness=0",
            "queue.groups_per_step=1",
            "trainer.stall_warn_s=5",
            "trainer.stall_limit_s=60",  # long enough for the first groups to arrive on a loaded box
        ],
    )
    job = TrainJob(cfg)
    job.ranks = create_trainer_group(job.cfg, tiny_checkpoint(tmp_path / "tiny"))
    job.source = PromptSource.remote(str(write_pool(tmp_path / "pool.parquet", 4)), seed=1)
    job.queue = TrajectoryQueue.remote(cfg.queue, 1, job.source)
    ray.get(job.queue.set_version.remote(3))  # the trainer is at version 3; the policy below still serves 0
    policy, verifier = FakePolicy.remote(1), SlowVerifier.remote(1, slow_p=0.0, fast_s=0.01)
    rollout = RolloutConfig(num_workers=1, groups_per_worker=1, samples_per_prompt=2, max_turns=1)
    factory = worker_factory(job.queue, job.source, policy, verifier, None, rollout, None, toy_episode)
    job.pool = RolloutPool(factory, 1, job.queue, job.source)
    lines = _Lines()  # the project's loggers may not propagate (setup_logging): listen on the job's own
    logging.getLogger("drkernel.train").addHandler(lines)
    try:
        with pytest.raises(JobStalled, match=r"stall_limit_s=60: no batch for \d+s: every finished group was dropped"):
            asyncio.run(job._run())
    finally:
        logging.getLogger("drkernel.train").removeHandler(lines)
        asyncio.run(job.pool.stop(timeout_s=5.0))
        for actor in (*job.ranks, job.queue, job.source, policy, verifier):
            ray.kill(actor)
    warned = [line for line in lines.lines if line.startswith("no batch for")]
    assert any("dropped as stale" in line for line in warned), warned  # logged before the stop, with counts
    assert all("dropped_stale=" in line and "workers=1" in line for line in warned)
    assert job.step == 0
