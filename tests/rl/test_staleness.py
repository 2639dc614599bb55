"""Admission accounting, drop-or-wait and state of drkernel.rl.staleness (pure, no Ray)."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from drkernel.rl.staleness import StalenessController


@dataclass
class G:
    group_id: str
    min_version: int


def admit_all(ctl: StalenessController, worker: str = "w") -> list:
    out = []
    while (admission := ctl.try_admit(worker)) is not None:
        out.append(admission)
    return out


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"groups_per_step": 0, "max_staleness": 1}, "groups_per_step"),
        ({"groups_per_step": 2, "max_staleness": -1}, "max_staleness"),
        ({"groups_per_step": 2, "max_staleness": 1, "on_violation": "skip"}, "on_violation"),
        ({"groups_per_step": 2, "max_staleness": 1, "steps_per_version": 0}, "steps_per_version"),
    ],
)
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        StalenessController(**kwargs)


def test_budget_is_eta_plus_version_plus_one_batches():
    ctl = StalenessController(groups_per_step=2, max_staleness=1)
    first = admit_all(ctl)
    assert len(first) == 4 and all(a.version == 0 for a in first)
    assert ctl.counters["running"] == 4 and ctl.counters["enqueued"] == 4
    for a in first:  # finishing does not free budget: accepted groups still count until dropped
        ctl.accept(a.ticket, G(f"g{a.ticket}", 0))
    assert ctl.try_admit("w") is None
    ctl.set_version(1)
    more = admit_all(ctl)
    assert [a.version for a in more] == [1, 1]
    assert ctl.capacity == 0 and ctl.budget == 6


def test_synchronous_mode_admits_one_batch_per_version():
    ctl = StalenessController(groups_per_step=3, max_staleness=0)
    slots = admit_all(ctl)
    assert len(slots) == 3
    for a in slots:
        ctl.accept(a.ticket, G(f"g{a.ticket}", 0))
    batch, dropped = ctl.take_batch(3)
    assert [g.group_id for g in batch] == ["g0", "g1", "g2"] and dropped == []
    assert ctl.try_admit("w") is None  # the next batch waits for the weights this one trains
    ctl.set_version(1)
    assert len(admit_all(ctl)) == 3


def test_steps_per_version_scales_the_budget():
    ctl = StalenessController(groups_per_step=2, max_staleness=0, steps_per_version=3)
    assert len(admit_all(ctl)) == 6  # a version lasts 3 steps of 2 groups


def test_release_reasons_counters_and_unknown_tickets():
    ctl = StalenessController(groups_per_step=4, max_staleness=0)
    a, b, c, d = admit_all(ctl)
    assert ctl.release(a.ticket, "unused") and not ctl.release(a.ticket, "unused")
    assert ctl.release(b.ticket, "failed") and ctl.release(c.ticket, "duplicate")
    with pytest.raises(ValueError, match="reason"):
        ctl.release(d.ticket, "bored")
    assert {k: ctl.counters[k] for k in ("running", "unused", "failed", "duplicates")} == {
        "running": 1,
        "unused": 1,
        "failed": 1,
        "duplicates": 1,
    }
    assert ctl.capacity == 3  # released slots return to the budget


def test_release_worker_frees_only_that_workers_slots():
    ctl = StalenessController(groups_per_step=2, max_staleness=1)
    mine = [ctl.try_admit("dead"), ctl.try_admit("dead")]
    other = ctl.try_admit("alive")
    freed = ctl.release_worker("dead")
    assert {a.ticket for a in freed} == {a.ticket for a in mine}
    assert [a.ticket for a in ctl.running_admissions()] == [other.ticket]
    assert ctl.counters["abandoned"] == 2 and ctl.counters["running"] == 1
    # A group of the dead worker that still arrives is whole and is accepted without double-counting running.
    ctl.accept(mine[0].ticket, G("late", 0))
    assert ctl.counters["running"] == 1 and ctl.counters["accepted"] == 1


def test_batches_are_served_oldest_version_first():
    ctl = StalenessController(groups_per_step=2, max_staleness=3)
    slots = admit_all(ctl)
    for a, version in zip(slots, [2, 0, 1, 0]):
        ctl.accept(a.ticket, G(f"v{version}t{a.ticket}", version))
    batch, _ = ctl.take_batch(3)
    assert [g.group_id for g in batch] == ["v0t1", "v0t3", "v1t2"]
    assert ctl.take_batch(2) == (None, [])  # one left: wait
    assert ctl.counters["consumed"] == 3 and ctl.batches == 1


def test_drop_discards_stale_groups_and_returns_their_budget():
    ctl = StalenessController(groups_per_step=1, max_staleness=1, on_violation="drop")
    old, fresh = admit_all(ctl)
    ctl.accept(fresh.ticket, G("fresh", 0))
    assert ctl.take_batch(1)[0][0].group_id == "fresh"
    ctl.set_version(2)  # `old` (started at 0) is now 2 versions behind
    ctl.accept(old.ticket, G("old", 0))
    capacity = ctl.capacity
    batch, dropped = ctl.take_batch(1)
    assert batch is None and [g.group_id for g in dropped] == ["old"]
    assert ctl.counters["dropped"] == 1 and ctl.counters["accepted"] == 1
    assert ctl.capacity == capacity + 1
    assert ctl.max_lag_consumed == 0


def test_wait_holds_the_trainer_back_for_a_laggard():
    ctl = StalenessController(groups_per_step=1, max_staleness=1, on_violation="wait")
    slow, fast = admit_all(ctl)  # both at version 0
    ctl.accept(fast.ticket, G("fast", 0))
    batch, _ = ctl.take_batch(1)  # after it the version is 1: `slow` (0) still within 1
    assert [g.group_id for g in batch] == ["fast"]
    ctl.set_version(1)
    third = ctl.try_admit("w")
    ctl.accept(third.ticket, G("third", 1))
    # Serving `third` would let version 2 come while `slow` (version 0) runs: hold back.
    assert ctl.take_batch(1) == (None, [])
    ctl.accept(slow.ticket, G("slow", 0))
    batch, dropped = ctl.take_batch(1)
    assert [g.group_id for g in batch] == ["slow"] and dropped == []
    assert ctl.counters["dropped"] == 0


def test_wait_mode_still_drops_a_group_that_is_stale_anyway():
    ctl = StalenessController(groups_per_step=1, max_staleness=0, on_violation="wait")
    a = ctl.try_admit("w")
    ctl.set_version(3)  # e.g. resumed with a version far ahead
    ctl.accept(a.ticket, G("ancient", 0))
    batch, dropped = ctl.take_batch(1)
    assert batch is None and [g.group_id for g in dropped] == ["ancient"]


def test_version_never_decreases():
    ctl = StalenessController(groups_per_step=1, max_staleness=0)
    ctl.set_version(2)
    with pytest.raises(ValueError, match="never decreases"):
        ctl.set_version(1)
    with pytest.raises(ValueError, match="batch_size"):
        ctl.take_batch(0)


def test_state_round_trip_restores_budget_without_a_burst():
    ctl = StalenessController(groups_per_step=2, max_staleness=1)
    slots = admit_all(ctl)
    for a in slots[:3]:
        ctl.accept(a.ticket, G(f"g{a.ticket}", 0))
    ctl.take_batch(2)
    ctl.set_version(1)
    state = ctl.state_dict()
    assert state["counters"]["running"] == 0  # running groups are re-issued on resume, not saved as running
    restored = StalenessController(groups_per_step=2, max_staleness=1)
    restored.load_state_dict(state, ctl.ready_groups())
    assert restored.version == 1 and restored.batches == 1 and restored.counters["accepted"] == 3
    assert [g.group_id for g in restored.ready_groups()] == ["g2"]
    assert restored.capacity == restored.budget - 3 == 3  # not the fresh-start budget of 6
    assert restored.try_admit("w").ticket == ctl.try_admit("w").ticket  # tickets never reused


def test_state_from_other_settings_or_with_bad_counters_is_refused():
    state = StalenessController(groups_per_step=2, max_staleness=1).state_dict()
    with pytest.raises(ValueError, match="saved with"):
        StalenessController(groups_per_step=4, max_staleness=1).load_state_dict(state, [])
    state["counters"]["accepted"] = -1
    with pytest.raises(ValueError, match="invalid queue counters"):
        StalenessController(groups_per_step=2, max_staleness=1).load_state_dict(state, [])


def simulate(seed: int, mode: str, eta: int, batch: int, steps_per_version: int, steps: int = 30) -> dict:
    """Workers that finish in random, heavy-tailed order (a slow verifier), die, fail; a trainer that takes
    batches and pushes a version every `steps_per_version` steps. Checks the invariants at every tick."""
    rng = random.Random(seed)
    ctl: StalenessController[G] = StalenessController(batch, eta, mode, steps_per_version)
    running: dict[int, dict] = {}  # ticket -> {"worker", "start_version", "ticks"}
    workers = [f"w{i}" for i in range(rng.randint(1, 4))]
    slots_per_worker = rng.randint(1, 4)
    trained = 0
    training_left = 0
    lags = []
    for tick in range(20_000):
        for worker in workers:
            while sum(1 for r in running.values() if r["worker"] == worker) < slots_per_worker:
                admission = ctl.try_admit(worker)
                if admission is None:
                    break
                ticks = rng.choice([1, 1, 2, 3, 5, 40]) if rng.random() < 0.9 else rng.randint(50, 200)
                running[admission.ticket] = {"worker": worker, "start": None, "ticks": ticks}
        for ticket, r in list(running.items()):
            if r["start"] is None:
                r["start"] = ctl.version  # the first turn samples the current weights
            r["ticks"] -= 1
            if r["ticks"] <= 0:
                del running[ticket]
                if rng.random() < 0.02:
                    ctl.release(ticket, "failed")
                else:
                    ctl.accept(ticket, G(f"t{ticket}", r["start"]))
        if rng.random() < 0.005:  # a worker dies: its slots are released, its groups re-admitted later
            dead = rng.choice(workers)
            for admission in ctl.release_worker(dead):
                running.pop(admission.ticket, None)
        assert ctl.counters["accepted"] + ctl.counters["running"] <= ctl.budget
        c = ctl.counters
        assert c["enqueued"] == (
            c["running"] + c["accepted"] + c["dropped"] + c["failed"] + c["abandoned"] + c["duplicates"] + c["unused"]
        )
        if training_left:
            training_left -= 1
            if training_left == 0:
                trained += 1
                if trained % steps_per_version == 0:
                    ctl.set_version(ctl.version + 1)
                if trained == steps:
                    return {"dropped": ctl.counters["dropped"], "lags": lags, "ticks": tick}
            continue
        got, _ = ctl.take_batch(batch)
        if got is not None:
            lags += [ctl.version - g.min_version for g in got]
            assert all(0 <= lag <= eta for lag in lags[-batch:]), lags[-batch:]
            training_left = rng.randint(1, 6)
    raise AssertionError(f"no progress: {trained} of {steps} steps; {ctl.stats()}")


@pytest.mark.parametrize("mode", ["drop", "wait"])
@pytest.mark.parametrize("eta", [0, 1, 3])
@pytest.mark.parametrize("steps_per_version", [1, 2])
def test_randomized_bound_never_exceeded(mode, eta, steps_per_version):
    drops = 0
    for seed in range(15):
        result = simulate(seed, mode, eta, batch=random.Random(seed).randint(1, 4), steps_per_version=steps_per_version)
        drops += result["dropped"]
        assert max(result["lags"]) <= eta
    if mode == "wait":
        assert drops == 0  # waiting prevents violations instead of discarding work
