"""Infrastructure faults never cost a group: a sample that meets two verifier deaths sends its group back to the
line (and it is trained once the verifier is back); a verifier that stays down stops the job with the reason.
Real Ray actors: a verifier actor killed by Ray (and restarted by it), the real queue, source and worker."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import ray
from rollout_support import FakePolicy, toy_episode, train_loop, write_pool

from actors.prompt_source import PromptSource
from actors.rollout_worker import RolloutWorker
from actors.trajectory_queue import TrajectoryQueue
from drkernel.config.train import QueueConfig, RolloutConfig

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
ROLLOUT = RolloutConfig(num_workers=1, groups_per_worker=2, samples_per_prompt=2, max_turns=1, sample_retries=1)


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class MortalVerifier:
    """Writes one file per call (so the test sees calls in flight across restarts); a 'doomed' call waits until
    the test writes `release`, so the test can kill the actor under it."""

    def __init__(self, calls: str) -> None:
        self.calls = Path(calls)

    async def verify(self, reference: str, candidate: str, options: Any = None) -> dict:
        (self.calls / f"{time.monotonic_ns()}-{uuid.uuid4().hex[:6]}").write_text(candidate)
        while candidate.startswith("doomed") and not (self.calls.parent / "release").exists():
            await asyncio.sleep(0.05)
        return {"correct": True, "compiled": True, "hack": None}


def _doomed_calls(calls: Path) -> list[str]:
    """The sample ('doomed/<group>/<sample>') of every doomed call so far, in arrival order."""
    return [f.read_text().rsplit("/", 1)[0] for f in sorted(calls.iterdir()) if f.read_text().startswith("doomed")]


def test_a_sample_that_meets_two_verifier_deaths_sends_its_group_back_to_the_line(ray_cluster, tmp_path):
    calls = tmp_path / "calls"
    calls.mkdir()
    path = write_pool(tmp_path / "pool.parquet", 3, kinds={1: "doomed"})
    source = PromptSource.remote(str(path), seed=3, num_epochs=1)
    queue = TrajectoryQueue.remote(QueueConfig(groups_per_step=1, max_staleness=3), 1, source)
    policy, verifier = FakePolicy.remote(3), MortalVerifier.remote(str(calls))
    worker = RolloutWorker.remote("solo", queue, source, policy, verifier, None, ROLLOUT, None, toy_episode)
    kills: list[str] = []
    under_first: set[str] = set()  # the samples in flight at the first kill

    def killer() -> None:
        """Kill the verifier under a doomed sample, then again under that same sample's retry."""
        deadline = time.monotonic() + 300
        while not _doomed_calls(calls) and time.monotonic() < deadline:
            time.sleep(0.05)
        seen = _doomed_calls(calls)
        ray.kill(verifier, no_restart=False)
        kills.append(seen[0])
        under_first.update(seen)
        while time.monotonic() < deadline:
            again = [s for s in _doomed_calls(calls)[len(seen) :] if s in seen]
            if again:
                ray.kill(verifier, no_restart=False)
                kills.append(again[0])
                break
            time.sleep(0.05)
        (tmp_path / "release").write_text("")

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()

    async def main():
        run = asyncio.ensure_future(worker.run.remote())
        result = await train_loop(queue, policy, 3, 1, seed=2, stall_s=240)
        return result, await run

    result, worker_stats = asyncio.run(main())
    thread.join(timeout=10)
    counts = Counter(g.split("#")[0] for g in result["consumed"])
    assert counts == {"plain00": 1, "doomed01": 1, "plain02": 1}, counts  # nothing lost, nothing twice
    assert len(kills) == 2 and kills[1] in under_first, kills  # a sample whose verifier died twice
    stats = ray.get(source.stats.remote())
    # Retired: none. Whether the second death fell on the sample's retry (the group then went back to the line,
    # requeued >= 1) or on a later call depends on when Ray restarts the actor; either way no group is lost.
    assert stats["failed"] == 0 and stats["stop_reason"] is None
    assert worker_stats["failed_groups"] == 0 and worker_stats["infra_requeued"] == stats["requeued"]
    for actor in (worker, queue, source, policy, verifier):
        ray.kill(actor)


def test_a_verifier_that_stays_down_stops_the_job_with_the_reason(ray_cluster, tmp_path):
    calls = tmp_path / "calls"
    calls.mkdir()
    path = write_pool(tmp_path / "pool.parquet", 2)
    source = PromptSource.remote(str(path), seed=4, num_epochs=1)
    queue = TrajectoryQueue.remote(QueueConfig(groups_per_step=1, max_staleness=3), 1, source)
    policy, verifier = FakePolicy.remote(4), MortalVerifier.remote(str(calls))
    ray.kill(verifier, no_restart=True)  # down for good
    cfg = ROLLOUT.model_copy(update={"infra_requeues": 1, "groups_per_worker": 1})
    worker = RolloutWorker.remote("solo", queue, source, policy, verifier, None, cfg, None, toy_episode)
    worker.run.remote()
    deadline = time.monotonic() + 120
    while ray.get(source.stop_reason.remote()) is None:
        assert time.monotonic() < deadline, ray.get(source.stats.remote())
        time.sleep(0.2)
    reason = ray.get(source.stop_reason.remote())
    assert "failed for infrastructure reasons 2 times (rollout.infra_requeues=1)" in reason
    assert "ActorDiedError" in reason or "RayActorError" in reason
    assert "the part that died: MortalVerifier" in reason  # the head of the error, kept
    stats = ray.get(source.stats.remote())
    assert stats["requeued"] >= 1 and stats["failed"] >= 1  # the loud stop, never a silent retirement
    for actor in (worker, queue, source, policy):
        ray.kill(actor)


def test_the_pool_stops_from_a_later_event_loop_after_the_run_failed(ray_cluster, tmp_path):
    """cleanup() after a failed run: the loop that started the pool is closed; stop() must still end every
    worker (it raised 'Event loop is closed' and left them running)."""
    from rollout_support import SlowVerifier

    from actors.rollout_pool import RolloutPool, worker_factory

    path = write_pool(tmp_path / "pool.parquet", 4, kinds={i: "sleepy" for i in range(4)})
    source = PromptSource.remote(str(path), seed=5, num_epochs=1)
    queue = TrajectoryQueue.remote(QueueConfig(groups_per_step=2, max_staleness=1), 1, source)
    policy, verifier = FakePolicy.remote(5), SlowVerifier.remote(5)
    factory = worker_factory(queue, source, policy, verifier, None, ROLLOUT, None, toy_episode)
    pool = RolloutPool(factory, 2, queue, source)

    async def failing_run() -> None:
        pool.start()
        while ray.get(source.stats.remote())["issued"] < 2:
            await asyncio.sleep(0.1)
        raise RuntimeError("the run failed")

    try:
        asyncio.run(failing_run())
    except RuntimeError as e:
        assert "the run failed" in str(e)
    handles = [handle for _, handle in pool.workers.values()]
    assert len(handles) == 2
    asyncio.run(pool.stop(timeout_s=5.0))
    for handle in handles:
        try:
            ray.get(handle.stats.remote(), timeout=60)
        except ray.exceptions.RayActorError:
            continue
        raise AssertionError("a rollout worker outlived the pool's stop")
    assert ray.get(source.stats.remote())["waiting_reissue"] == ray.get(source.stats.remote())["outstanding"]
    for actor in (queue, source, policy, verifier):
        ray.kill(actor)
