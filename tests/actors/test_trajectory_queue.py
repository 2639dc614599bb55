"""TrajectoryQueue and PromptSource as real Ray actors: admission waits, batches, duplicates, drops, and a
checkpoint state that neither loses nor repeats a group."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
import ray
from rollout_support import write_pool

from actors.prompt_source import PromptSource
from actors.trajectory_queue import TrajectoryQueue
from drkernel.types.group import FinishedGroup, PromptGroup
from drkernel.types.trajectory import Trajectory, Turn

N = 8


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    return write_pool(tmp_path_factory.mktemp("queue") / "pool.parquet", N)


def finished(group: PromptGroup | str, ticket: int, version: int = 0) -> FinishedGroup:
    group_id = group.group_id if isinstance(group, PromptGroup) else group
    traj = Trajectory(
        group_id=group_id,
        sample_index=0,
        task_uid="t",
        prompt_ids=[1],
        response_ids=[5],
        response_mask=[1],
        response_logprobs=[-1.0],
        turns=[Turn(0, 0, 1, version, "stop", "", None)],
    )
    return FinishedGroup(group_id, "t", version, [traj], ticket, "w")


def test_admission_waits_for_a_version_and_batches_wait_for_groups(ray_cluster):
    queue = TrajectoryQueue.remote({"groups_per_step": 2, "max_staleness": 0})

    async def main():
        slots = [await queue.try_admit.remote("w") for _ in range(2)]
        assert all(s is not None for s in slots)
        assert await queue.try_admit.remote("w", 0.05) is None  # budget of version 0 is used up
        waiting = asyncio.ensure_future(queue.try_admit.remote("w", 5.0))
        batch = asyncio.ensure_future(queue.get_batch.remote(None, 5.0))
        await asyncio.sleep(0.2)
        assert not waiting.done() and not batch.done()
        for s in slots:
            assert await queue.put.remote(finished(f"g{s.ticket}", s.ticket))
        assert sorted(g.group_id for g in await batch) == ["g0", "g1"]
        assert not waiting.done()  # consumed, but version 0's budget is still spent: synchronous RL
        t0 = time.monotonic()
        await queue.set_version.remote(1)
        admitted = await waiting
        assert admitted.version == 1 and time.monotonic() - t0 < 1.0  # woken by the change, not polling
        assert await queue.get_batch.remote(2, 0.1) == []  # timeout: an empty list, nothing consumed
        stats = await queue.stats.remote()
        assert (stats["consumed"], stats["running"], stats["accepted"], stats["enqueued"]) == (2, 1, 2, 3)

    asyncio.run(main())
    ray.kill(queue)


def test_bad_input_is_refused_with_its_name(ray_cluster):
    queue = TrajectoryQueue.remote({"groups_per_step": 1, "max_staleness": 0})
    with pytest.raises(TypeError, match="FinishedGroup"):
        ray.get(queue.put.remote({"group_id": "x"}))
    with pytest.raises(ValueError, match="no trajectories"):
        ray.get(queue.put.remote(FinishedGroup("x", "t", 0, [])))
    ray.get(queue.set_version.remote(2))  # one at a time: an async actor need not run two calls in sent order
    with pytest.raises(ValueError, match="never decreases"):
        ray.get(queue.set_version.remote(1))
    bad = TrajectoryQueue.remote({"groups_per_step": 1, "on_violation": "skip"})
    with pytest.raises(ray.exceptions.ActorDiedError, match="on_violation"):
        ray.get(bad.stats.remote())
    ray.kill(queue)


def test_stale_groups_are_dropped_and_their_ids_kept(ray_cluster):
    queue = TrajectoryQueue.remote({"groups_per_step": 1, "max_staleness": 1, "on_violation": "drop"})
    old, fresh = ray.get([queue.try_admit.remote("w"), queue.try_admit.remote("w")])
    ray.get(queue.put.remote(finished("fresh", fresh.ticket)))
    assert [g.group_id for g in ray.get(queue.get_batch.remote(1, 1.0))] == ["fresh"]
    ray.get(queue.set_version.remote(2))
    ray.get(queue.put.remote(finished("old", old.ticket, version=0)))
    assert ray.get(queue.get_batch.remote(1, 0.2)) == []
    assert ray.get(queue.dropped_group_ids.remote()) == ["old"]
    assert ray.get(queue.stats.remote())["dropped"] == 1
    ray.kill(queue)


def test_a_released_workers_waiting_admission_takes_no_slot(ray_cluster):
    """A worker killed while its try_admit waits for budget: the pool releases its slots, which wakes that
    call; it must not take the freed slot for a worker nobody will release again."""
    queue = TrajectoryQueue.remote({"groups_per_step": 1, "max_staleness": 0})
    assert ray.get(queue.try_admit.remote("dead")) is not None  # the budget's one slot
    assert ray.get(queue.stats.remote())["capacity"] == 0
    waiting = queue.try_admit.remote("dead", 30.0)
    assert ray.get(queue.release_worker.remote("dead")) == 1
    assert ray.get(waiting) is None
    stats = ray.get(queue.stats.remote())
    assert stats["running"] == 0 and stats["capacity"] == stats["budget"], stats
    assert ray.get(queue.try_admit.remote("new")) is not None  # the replacement gets the freed slots
    ray.kill(queue)


def test_second_copy_of_a_reissued_group_is_discarded(ray_cluster, pool):
    source = PromptSource.remote(str(pool), seed=1)
    queue = TrajectoryQueue.remote({"groups_per_step": 1, "max_staleness": 3}, 1, source)
    first = ray.get(queue.try_admit.remote("dead"))
    group = ray.get(source.next_group.remote("dead", first.version))
    assert ray.get(queue.release_worker.remote("dead")) == 1
    assert ray.get(source.reissue.remote("dead")) == [group.group_id]
    second = ray.get(queue.try_admit.remote("new"))
    again = ray.get(source.next_group.remote("new", second.version))
    assert again.group_id == group.group_id  # re-issued groups come first, same id
    # The dead worker's copy arrives late: it is the first finished copy, so it is kept ...
    assert ray.get(queue.put.remote(finished(group, first.ticket)))
    # ... and the new worker's copy is a duplicate: discarded, its slot freed.
    assert not ray.get(queue.put.remote(finished(again, second.ticket)))
    stats = ray.get(queue.stats.remote())
    assert (stats["accepted"], stats["duplicates"], stats["running"], stats["ready"]) == (1, 1, 0, 1)
    assert ray.get(source.stats.remote())["duplicates"] == 1
    assert ray.get(source.outstanding.remote()) == {}
    ray.get(source.close.remote())
    ray.kill(queue)
    ray.kill(source)


def test_failed_group_is_reported_not_reissued(ray_cluster, pool):
    source = PromptSource.remote(str(pool), seed=2)
    queue = TrajectoryQueue.remote({"groups_per_step": 1, "max_staleness": 0}, 1, source)
    slot = ray.get(queue.try_admit.remote("w"))
    group = ray.get(source.next_group.remote("w", 0))
    assert ray.get(queue.fail.remote(slot.ticket, group.group_id, "boom"))
    assert ray.get(source.failed.remote()) == [{"group_id": group.group_id, "error": "boom"}]
    assert ray.get(source.reissue.remote("w")) == []
    stats = ray.get(queue.stats.remote())
    assert (stats["failed"], stats["running"], stats["capacity"]) == (1, 0, 1)
    ray.get(source.close.remote())
    ray.kill(queue)
    ray.kill(source)


def test_state_round_trip_neither_loses_nor_repeats_a_group(ray_cluster, pool):
    """Run part of an epoch, snapshot mid-flight (groups out with workers, groups waiting in the queue, one
    consumed), restore into fresh actors, drain: every row is trained exactly once."""
    cfg = {"groups_per_step": 2, "max_staleness": 2}
    source = PromptSource.remote(str(pool), seed=3, num_epochs=1)
    queue = TrajectoryQueue.remote(cfg, 1, source)
    trained: list[str] = []
    slots = [ray.get(queue.try_admit.remote("w")) for _ in range(5)]
    groups = [ray.get(source.next_group.remote("w", s.version)) for s in slots]
    for s, g in list(zip(slots, groups))[:3]:
        ray.get(queue.put.remote(finished(g, s.ticket, s.version)))
    trained += [g.group_id for g in ray.get(queue.get_batch.remote(2, 1.0))]
    ray.get(queue.set_version.remote(1))
    state = ray.get(queue.state_dict.remote())
    assert len(state["ready"]) == 1 and len(state["prompt_source"]["outstanding"]) == 2
    before = ray.get(queue.stats.remote())
    for actor in (queue, source):
        ray.kill(actor)

    source = PromptSource.remote(str(pool), seed=3, num_epochs=1)
    queue = TrajectoryQueue.remote(cfg, 1, source)
    ray.get(queue.load_state_dict.remote(state))
    after = ray.get(queue.stats.remote())
    for key in ("version", "batches", "accepted", "consumed", "enqueued"):
        assert after[key] == before[key], key
    assert after["running"] == 0 and after["budget"] - after["capacity"] == before["accepted"]
    out_before = [raw["group_id"] for raw in state["prompt_source"]["outstanding"]]
    while True:
        slot = ray.get(queue.try_admit.remote("w2", 1.0))
        assert slot is not None
        group = ray.get(source.next_group.remote("w2", slot.version))
        if group is None:
            ray.get(queue.release.remote(slot.ticket))
            break
        if out_before:  # the groups that were out when the state was saved come back first, in order
            assert group.group_id == out_before.pop(0)
        ray.get(queue.put.remote(finished(group, slot.ticket, slot.version)))
        while batch := ray.get(queue.get_batch.remote(2, 0.05)):
            trained += [g.group_id for g in batch]
            ray.get(queue.set_version.remote(ray.get(queue.stats.remote())["version"] + 1))
    while batch := ray.get(queue.get_batch.remote(1, 0.2)):
        trained += [g.group_id for g in batch]
    assert ray.get(queue.stats.remote())["dropped"] == 0
    counts = Counter(trained)
    assert len(counts) == N and set(counts.values()) == {1}, counts
    with pytest.raises(ValueError, match="saved with"):
        other = TrajectoryQueue.remote({"groups_per_step": 3, "max_staleness": 2})
        ray.get(other.load_state_dict.remote({**state, "prompt_source": None}))
    ray.get(source.close.remote())
    for actor in (queue, source, other):
        ray.kill(actor)


def test_group_ids_name_epoch_and_position(ray_cluster, pool):
    source = PromptSource.remote(str(pool), seed=4, num_epochs=2)
    ids = []
    while (group := ray.get(source.next_group.remote("w", 0))) is not None:
        ids.append(group.group_id)
    assert ray.get(source.next_group.remote("w", 0)) is None
    assert len(set(ids)) == 2 * N
    for epoch in (0, 1):
        mine = ids[epoch * N : (epoch + 1) * N]
        assert [g.split("#")[1] for g in mine] == [f"e{epoch}p{p}" for p in range(N)]
        assert sorted(g.split("#")[0] for g in mine) == [f"plain{i:02d}" for i in range(N)]
    assert ray.get(source.stats.remote())["outstanding"] == 2 * N
    ray.kill(source)
