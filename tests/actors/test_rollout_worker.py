"""Rollout workers and the pool on real Ray actors: the staleness bound under an adversarially slow verifier,
a killed worker replaced with no group lost or trained twice, failing samples, and a clean stop."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
import ray
from rollout_support import FakePolicy, SlowVerifier, toy_episode, train_loop, write_pool

from actors.prompt_source import PromptSource
from actors.rollout_pool import RolloutPool, worker_factory
from actors.rollout_worker import RolloutWorker
from drkernel.config.train import QueueConfig, RolloutConfig

ROLLOUT = RolloutConfig(num_workers=2, groups_per_worker=2, samples_per_prompt=3, max_turns=2)


def start(pool_path, queue_cfg: QueueConfig, seed: int, **verifier_kw):
    from actors.trajectory_queue import TrajectoryQueue

    source = PromptSource.remote(str(pool_path), seed=seed, num_epochs=1)
    queue = TrajectoryQueue.remote(queue_cfg, 1, source)
    policy, verifier = FakePolicy.remote(seed), SlowVerifier.remote(seed, **verifier_kw)
    return source, queue, policy, verifier


def cleanup(*actors) -> None:
    for actor in actors:
        ray.kill(actor)


def issued_count(source) -> int:
    """Groups the source issued (first issues only, re-issues not counted)."""
    return ray.get(source.stats.remote())["issued"]


@pytest.mark.parametrize("mode", ["drop", "wait"])
def test_staleness_bound_holds_under_a_slow_verifier(ray_cluster, tmp_path, mode):
    n = 16
    path = write_pool(tmp_path / "pool.parquet", n)
    queue_cfg = QueueConfig(groups_per_step=2, max_staleness=1, on_violation=mode)
    source, queue, policy, verifier = start(path, queue_cfg, seed=11, slow_p=0.15, slow_s=0.5)
    factory = worker_factory(queue, source, policy, verifier, None, ROLLOUT, episode_fn=toy_episode)

    async def main():
        pool = RolloutPool(factory, ROLLOUT.num_workers, queue, source)
        pool.start()
        result = await train_loop(queue, policy, n, queue_cfg.groups_per_step, seed=3)
        await pool.wait()
        return result, pool.stats()

    result, pool_stats = asyncio.run(main())
    stats = result["stats"]
    assert result["budget_ok"] and max(result["lags"]) <= queue_cfg.max_staleness
    assert stats["max_lag_consumed"] <= queue_cfg.max_staleness
    dropped = ray.get(queue.dropped_group_ids.remote())
    assert Counter(result["consumed"] + dropped) == Counter(set(result["consumed"] + dropped))
    assert len(result["consumed"]) + len(dropped) == n == issued_count(source)
    if mode == "wait":
        assert dropped == []
    assert pool_stats["restarts"] == 0
    assert ray.get(verifier.num_calls.remote()) >= n * ROLLOUT.samples_per_prompt * ROLLOUT.max_turns
    cleanup(queue, source, policy, verifier)


def test_killed_worker_is_replaced_and_no_group_is_lost_or_repeated(ray_cluster, tmp_path):
    n = 16
    path = write_pool(tmp_path / "pool.parquet", n)
    queue_cfg = QueueConfig(groups_per_step=2, max_staleness=2, on_violation="wait")
    source, queue, policy, verifier = start(path, queue_cfg, seed=5, slow_p=0.3, slow_s=0.3)
    factory = worker_factory(queue, source, policy, verifier, None, ROLLOUT, episode_fn=toy_episode)
    killed: list[tuple[str, list[str]]] = []

    async def main():
        pool = RolloutPool(factory, ROLLOUT.num_workers, queue, source)
        pool.start()

        async def kill_one(consumed: int) -> None:
            if killed or consumed < 4:
                return
            for _ in range(100):  # kill worker 0 while it has groups out
                worker_id, handle = pool.workers[0]
                mine = [g for g, owner in (await source.outstanding.remote()).items() if owner == worker_id]
                if mine:
                    ray.kill(handle, no_restart=True)
                    killed.append((worker_id, mine))
                    return
                await asyncio.sleep(0.02)
            raise AssertionError("worker 0 never had a group out")

        result = await train_loop(queue, policy, n, queue_cfg.groups_per_step, seed=4, on_batch=kill_one)
        await pool.wait()
        return result, pool.stats()

    result, pool_stats = asyncio.run(main())
    assert killed, "the test never killed a worker"
    dead_id, its_groups = killed[0]
    assert pool_stats["restarts"] == 1 and pool_stats["deaths"][0]["worker_id"] == dead_id
    assert pool_stats["workers"][0] != dead_id  # the replacement has a new id
    counts = Counter(result["consumed"])
    assert set(counts.values()) == {1} and len(counts) == n == issued_count(source), counts
    assert set(its_groups) <= set(counts)  # the dead worker's groups were re-issued and trained
    source_stats = ray.get(source.stats.remote())
    # exactly the groups the dead worker still held are re-issued: one it finished just as it died needs none, one it
    # took after the test looked is included (both seen under CI load)
    handed_back = pool_stats["deaths"][0]["reissued"]
    assert source_stats["outstanding"] == 0 and source_stats["reissued"] == len(handed_back)
    assert set(handed_back) <= set(counts)
    assert result["stats"]["running"] == 0 and result["stats"]["dropped"] == 0
    cleanup(queue, source, policy, verifier)


def test_failing_samples_are_retried_and_a_poison_group_is_reported(ray_cluster, tmp_path):
    n = 6
    path = write_pool(tmp_path / "pool.parquet", n, kinds={1: "flaky", 4: "poison"})
    queue_cfg = QueueConfig(groups_per_step=1, max_staleness=3)
    source, queue, policy, verifier = start(path, queue_cfg, seed=7, slow_p=0.0, fast_s=0.01)
    worker = RolloutWorker.remote("solo", queue, source, policy, verifier, None, ROLLOUT, None, toy_episode)

    async def main():
        run = asyncio.ensure_future(worker.run.remote())
        result = await train_loop(queue, policy, n, 1, seed=1)
        return result, await run

    result, worker_stats = asyncio.run(main())
    failed = ray.get(source.failed.remote())
    assert [f["group_id"].split("#")[0] for f in failed] == ["poison04"]
    assert "failed 2 times" in failed[0]["error"] and "verifier replica lost" in failed[0]["error"]
    assert sorted(g.split("#")[0] for g in result["consumed"]) == [
        "flaky01",
        "plain00",
        "plain02",
        "plain03",
        "plain05",
    ]
    assert result["stats"]["failed"] == 1 and result["stats"]["running"] == 0
    # every flaky sample failed once and was retried; the poison group's first sample failed twice
    assert worker_stats["sample_errors"] >= ROLLOUT.samples_per_prompt + 2
    assert worker_stats["failed_groups"] == 1 and worker_stats["live_episodes"] == 0
    cleanup(worker, queue, source, policy, verifier)


def test_stop_cancels_every_episode_and_hands_groups_back(ray_cluster, tmp_path):
    path = write_pool(tmp_path / "pool.parquet", 4, kinds={i: "sleepy" for i in range(4)})
    source, queue, policy, verifier = start(path, QueueConfig(groups_per_step=2, max_staleness=1), seed=9)
    worker = RolloutWorker.remote("sleeper", queue, source, policy, verifier, None, ROLLOUT, None, toy_episode)
    run = worker.run.remote()
    deadline = time.monotonic() + 90
    while len(ray.get(source.outstanding.remote())) < ROLLOUT.groups_per_worker:
        assert time.monotonic() < deadline, "the worker never took its groups"
        time.sleep(0.05)
    stats = ray.get(worker.stats.remote())
    assert stats["live_episodes"] == ROLLOUT.groups_per_worker * ROLLOUT.samples_per_prompt
    t0 = time.monotonic()
    ray.get(worker.stop.remote())
    final = ray.get(run, timeout=10)
    assert time.monotonic() - t0 < 15
    assert final["live_episodes"] == 0 and final["live_slots"] == 0
    assert set(ray.get(source.outstanding.remote()).values()) == {None}  # waiting to be re-issued
    assert ray.get(queue.stats.remote())["running"] == 0
    cleanup(worker, queue, source, policy, verifier)


def test_pool_stop_leaves_no_worker_and_hands_groups_back(ray_cluster, tmp_path):
    path = write_pool(tmp_path / "pool.parquet", 6, kinds={i: "sleepy" for i in range(6)})
    source, queue, policy, verifier = start(path, QueueConfig(groups_per_step=2, max_staleness=1), seed=10)
    factory = worker_factory(queue, source, policy, verifier, None, ROLLOUT, episode_fn=toy_episode)

    async def main():
        pool = RolloutPool(factory, 2, queue, source)
        pool.start()
        deadline = time.monotonic() + 90
        while len(await source.outstanding.remote()) < 4:  # the budget: (1 + 0 + 1) * 2 groups
            assert time.monotonic() < deadline, "the workers never took their groups"
            await asyncio.sleep(0.05)
        handles = [handle for _, handle in pool.workers.values()]
        t0 = time.monotonic()
        await pool.stop()
        return handles, time.monotonic() - t0, pool.stats()

    handles, stop_s, stats = asyncio.run(main())
    assert stop_s < 20 and stats["workers"] == {} and stats["restarts"] == 0
    for handle in handles:
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(handle.stats.remote(), timeout=10)
    assert set(ray.get(source.outstanding.remote()).values()) == {None}
    assert ray.get(queue.stats.remote())["running"] == 0
    cleanup(queue, source, policy, verifier)
