"""The training job survives its own parts failing: a policy replica killed mid-run (asynchronous and
synchronous RL) restarts on the job's last published weights, and the run reaches its step count.

Marked integration; the tiny recipe on the session's Ray cluster. The replica is killed through Ray (the
actor dies as on an out-of-memory kill or a crash); Serve starts a new one from the deployment's arguments.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import ray

from drkernel.config.base import load_config
from drkernel.config.train import TrainConfig

pytestmark = pytest.mark.integration


def _cfg(overrides: list[str], *extra: str) -> TrainConfig:
    return load_config(TrainConfig, None, [*overrides, *extra])


def _replica_actors(app_name: str) -> list[str]:
    """Names of the policy app's replica actors (Serve names them SERVE_REPLICA::<app>#<deployment>#<id>)."""
    prefix = f"SERVE_REPLICA::{app_name}#PolicyReplica#"
    return sorted(
        entry["name"]
        for entry in ray.util.list_named_actors(all_namespaces=True)
        if entry["namespace"] == "serve" and entry["name"].startswith(prefix)
    )


def _steps_written(run: Path) -> int:
    path = run / "metrics.jsonl"
    return len(path.read_text().splitlines()) if path.is_file() else 0


class ReplicaKiller(threading.Thread):
    """Once the job has written `after_step` steps (so pushed at least that many versions), kill one replica."""

    def __init__(self, run: Path, app_name: str, after_step: int, timeout_s: float = 600.0) -> None:
        super().__init__(daemon=True)
        self.run_dir, self.app_name, self.after_step, self.timeout_s = run, app_name, after_step, timeout_s
        self.killed: str | None = None
        self.error: str | None = None

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while _steps_written(self.run_dir) < self.after_step:
            if time.monotonic() > deadline:
                self.error = f"the job wrote fewer than {self.after_step} steps in {self.timeout_s:.0f}s"
                return
            time.sleep(0.2)
        names = _replica_actors(self.app_name)
        if not names:
            self.error = "no policy replica actor found"
            return
        ray.kill(ray.get_actor(names[0], namespace="serve"), no_restart=True)
        self.killed = names[0]


@pytest.mark.parametrize("staleness", [1, 0], ids=["async", "sync"])
def test_a_killed_policy_replica_restarts_on_the_published_weights(ray_cluster, tiny_recipe, tmp_path, staleness):
    """Kill the only policy replica after step 1's push: the restarted replica must start on the published
    version (not the SFT weights at version 0), the run must reach its 4 steps, and at the end the replica's
    parameters are bit-identical to the trainer's."""
    from actors.job import TrainJob
    from serve_apps.policy import policy_handle

    _, overrides = tiny_recipe
    run = tmp_path / "run"
    cfg = _cfg(
        overrides,
        f"trainer.output_dir={run}",
        f"queue.max_staleness={staleness}",
        "trainer.total_steps=4",
        "trainer.checkpoint_every=4",
        "rollout.sample_retries=2",
        "trainer.stall_warn_s=30",
        "trainer.stall_limit_s=600",  # a replica left on version 0 stalls a synchronous run: fail, do not hang
    )
    job = TrainJob(cfg)
    killer = ReplicaKiller(run, cfg.policy.app_name, after_step=1)
    try:
        job.setup()
        killer.start()
        job.run()
        killer.join(timeout=5)
        handle = policy_handle(cfg.policy.app_name)
        stats = handle.broadcast("stats").results(timeout_s=60)
        replica_sums = handle.broadcast("state_checksum").results(timeout_s=60)
        trainer_sum = ray.get(job.ranks[0].checksum.remote())
        names_after = _replica_actors(cfg.policy.app_name)
    finally:
        job.cleanup()
    assert killer.error is None, killer.error
    assert killer.killed is not None and killer.killed not in names_after, "the replica was not replaced"
    summary = job.summary(0.0)
    assert summary["steps"] == 4 and summary["policy_versions"] == 4
    (replica,) = stats
    assert replica["started_version"] >= 1, f"the restarted replica started on version {replica['started_version']}"
    assert replica["version"] == 4
    assert replica_sums == [trainer_sum]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert max(r["staleness/max"] for r in rows) <= staleness
