"""Staleness control between rollouts and training: admission accounting (AReaL-style) plus drop-or-wait.

Admission. A prompt group may start only while

    accepted + running < (max_staleness + version + 1) * groups_per_version

where `groups_per_version = groups_per_step * steps_per_version` (the trainer pushes weights every
`steps_per_version` steps; with 1 this is exactly AReaL's `(eta + v + 1) * B`). `accepted` counts finished
groups that were kept (consumed or waiting to be), `running` the admitted ones still being sampled. A group
admitted at version v therefore lands in one of the first `(eta + v + 1) * steps_per_version` batches and,
when groups finish in admission order, is trained at most `eta` versions after it started. `max_staleness`
0 is synchronous RL: a batch's groups all start under the weights that the batch then updates.

Groups finish out of order (a slow verifier, a long episode), so admission alone cannot bound the lag of
every group. At consumption a group whose oldest token came from a version below `version - max_staleness`
is a violation, handled by `on_violation`:

- "drop": the group is discarded (counted in `dropped`) and its slot is returned to the budget.
- "wait": the trainer is held back instead. A batch is handed out only when the pushes ahead still leave
  every older group a batch to be trained in; otherwise `take_batch` returns None and the caller waits for
  the laggards. A group that is stale anyway (e.g. the version was
  set several steps ahead) cannot be rescued by waiting and is dropped.

Finished groups are served oldest version first, which keeps drops rare. Everything here is plain Python
with no locks: the owning actor runs it on one event loop, so each call is atomic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

ViolationPolicy = Literal["drop", "wait"]
ReleaseReason = Literal["unused", "failed", "duplicate", "abandoned"]
_COUNTERS = ("enqueued", "running", "accepted", "consumed", "dropped", "failed", "duplicates", "unused", "abandoned")


class Versioned(Protocol):
    """What the controller needs from a finished group."""

    group_id: str

    @property
    def min_version(self) -> int: ...


T = TypeVar("T", bound=Versioned)


@dataclass(frozen=True)
class Admission:
    """A running slot: the ticket to hand back with the finished group, and the version it started under."""

    ticket: int
    version: int
    worker_id: str


class StalenessController(Generic[T]):
    """Admission budget, counters and the buffer of finished groups waiting for the trainer."""

    def __init__(
        self,
        groups_per_step: int,
        max_staleness: int,
        on_violation: ViolationPolicy = "drop",
        steps_per_version: int = 1,
    ):
        if groups_per_step < 1:
            raise ValueError(f"groups_per_step must be >= 1, got {groups_per_step}")
        if max_staleness < 0:
            raise ValueError(f"max_staleness must be >= 0, got {max_staleness}")
        if on_violation not in ("drop", "wait"):
            raise ValueError(f"on_violation must be 'drop' or 'wait', got {on_violation!r}")
        if steps_per_version < 1:
            raise ValueError(f"steps_per_version must be >= 1, got {steps_per_version}")
        self.groups_per_step = groups_per_step
        self.max_staleness = max_staleness
        self.on_violation: ViolationPolicy = on_violation
        self.steps_per_version = steps_per_version
        self.version = 0
        self.batches = 0  # batches handed to the trainer
        self.counters = dict.fromkeys(_COUNTERS, 0)
        self._next_ticket = 0
        self._running: dict[int, Admission] = {}
        self._ready: list[tuple[int, int, T]] = []  # (min_version, arrival, group), kept sorted
        self._arrivals = 0
        self.max_lag_consumed = 0  # largest version - min_version of any consumed group

    # ---- admission ---------------------------------------------------------------------------------
    @property
    def budget(self) -> int:
        """Groups that may ever have started (kept or running) at the current version."""
        return (self.max_staleness + self.version + 1) * self.groups_per_step * self.steps_per_version

    @property
    def capacity(self) -> int:
        return max(0, self.budget - (self.counters["accepted"] + self.counters["running"]))

    def try_admit(self, worker_id: str) -> Admission | None:
        """Take a running slot if the budget allows; None otherwise."""
        if self.capacity <= 0:
            return None
        admission = Admission(self._next_ticket, self.version, worker_id)
        self._next_ticket += 1
        self._running[admission.ticket] = admission
        self.counters["enqueued"] += 1
        self.counters["running"] += 1
        return admission

    def _end_running(self, ticket: int) -> bool:
        if self._running.pop(ticket, None) is None:
            return False
        self.counters["running"] -= 1
        return True

    def release(self, ticket: int, reason: ReleaseReason) -> bool:
        """Return a slot that produced no kept group; False if the ticket was not running (already released)."""
        if reason not in ("unused", "failed", "duplicate", "abandoned"):
            raise ValueError(f"unknown release reason {reason!r}")
        if not self._end_running(ticket):
            return False
        self.counters["failed" if reason == "failed" else "duplicates" if reason == "duplicate" else reason] += 1
        return True

    def release_worker(self, worker_id: str) -> list[Admission]:
        """Free every slot of a worker that died or stopped; its groups are re-issued by the prompt source."""
        mine = [a for a in self._running.values() if a.worker_id == worker_id]
        for admission in mine:
            self.release(admission.ticket, "abandoned")
        return mine

    def running_admissions(self) -> list[Admission]:
        return list(self._running.values())

    # ---- finished groups ---------------------------------------------------------------------------
    def accept(self, ticket: int, group: T) -> None:
        """A finished group to train on. An unknown ticket (its worker was declared dead while the group was
        on its way) is still accepted: the group is whole, and the prompt source decides duplicates."""
        self._end_running(ticket)
        self.counters["accepted"] += 1
        self._insert(group)

    def _insert(self, group: T) -> None:
        entry = (group.min_version, self._arrivals, group)
        self._arrivals += 1
        index = len(self._ready)
        while index > 0 and self._ready[index - 1][:2] > entry[:2]:
            index -= 1
        self._ready.insert(index, entry)

    @property
    def num_ready(self) -> int:
        return len(self._ready)

    def ready_groups(self) -> list[T]:
        return [entry[2] for entry in self._ready]

    def is_stale(self, min_version: int, version: int | None = None) -> bool:
        return min_version < (self.version if version is None else version) - self.max_staleness

    def _drop_stale(self) -> list[T]:
        stale = [entry for entry in self._ready if self.is_stale(entry[0])]
        if stale:
            self._ready = [entry for entry in self._ready if not self.is_stale(entry[0])]
            self.counters["dropped"] += len(stale)
            self.counters["accepted"] -= len(stale)  # a dropped group frees its place in the budget
        return [entry[2] for entry in stale]

    def last_batch(self, version: int) -> int:
        """Index of the last batch a group sampled at `version` may be in: the trainer pushes a new version
        after every `steps_per_version`-th batch, and a group may be trained up to `max_staleness` behind."""
        k = self.steps_per_version
        return (version + self.max_staleness - self.version + self.batches // k + 1) * k - 1

    def take_batch(self, batch_size: int) -> tuple[list[T] | None, list[T]]:
        """(batch or None if the trainer must wait, groups dropped as stale by this call)."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        dropped = self._drop_stale()
        if len(self._ready) < batch_size:
            return None, dropped
        if self.on_violation == "wait" and self._holds_back(batch_size):
            return None, dropped
        taken, self._ready = self._ready[:batch_size], self._ready[batch_size:]
        self.max_lag_consumed = max([self.max_lag_consumed] + [self.version - entry[0] for entry in taken])
        batch = [entry[2] for entry in taken]
        self.counters["consumed"] += batch_size
        self.batches += 1
        return batch, dropped

    def _holds_back(self, batch_size: int) -> bool:
        """True when serving the oldest `batch_size` groups now would leave some older group no batch to be
        trained in before it is too stale, and waiting for a running older group could change the batch.

        Earliest-deadline-first feasibility: after this batch, the groups left behind (finished or running,
        by version; a running group by the version it was admitted at, a lower bound) must fit, for every
        version v, into the batches up to `last_batch(v)`. Groups stale already are lost causes (dropped on
        arrival) and never waited for; when no running group is older than the batch, waiting cannot help.
        """
        newest_taken = self._ready[batch_size - 1][0]
        running = [a.version for a in self._running.values() if not self.is_stale(a.version)]
        if not any(v < newest_taken for v in running):
            return False
        left = sorted([entry[0] for entry in self._ready[batch_size:]] + running)
        return any(count > (self.last_batch(v) - self.batches) * batch_size for count, v in enumerate(left, 1))

    # ---- version and state -------------------------------------------------------------------------
    def set_version(self, version: int) -> None:
        if not isinstance(version, int) or version < self.version:
            raise ValueError(f"policy version must be an int that never decreases: {self.version} -> {version!r}")
        self.version = version

    def stats(self) -> dict[str, Any]:
        running_versions = [a.version for a in self._running.values()]
        ready_versions = [entry[0] for entry in self._ready]
        oldest = min(running_versions + ready_versions, default=self.version)
        return {
            **self.counters,
            "version": self.version,
            "batches": self.batches,
            "ready": len(self._ready),
            "capacity": self.capacity,
            "budget": self.budget,
            "oldest_version_in_flight": oldest,
            "max_lag_consumed": self.max_lag_consumed,
        }

    def state_dict(self) -> dict[str, Any]:
        """Counters, version and cursor; finished groups are the owner's to serialise (`ready_groups`).
        Running slots are not saved: their groups are re-issued on resume, so `running` restarts at 0."""
        counters = dict(self.counters, running=0)
        return {
            "version": self.version,
            "batches": self.batches,
            "next_ticket": self._next_ticket,
            "max_lag_consumed": self.max_lag_consumed,
            "counters": counters,
            "config": {
                "groups_per_step": self.groups_per_step,
                "max_staleness": self.max_staleness,
                "steps_per_version": self.steps_per_version,
            },
        }

    def load_state_dict(self, state: dict[str, Any], ready: list[T]) -> None:
        """Resume: the version and `accepted` come back together, so the budget does not burst (AReaL #1388)."""
        config = state.get("config", {})
        mine = {
            "groups_per_step": self.groups_per_step,
            "max_staleness": self.max_staleness,
            "steps_per_version": self.steps_per_version,
        }
        if config != mine:
            raise ValueError(f"queue state was saved with {config}, this queue has {mine}")
        counters = state.get("counters", {})
        unknown = set(counters) - set(_COUNTERS)
        if unknown or any(not isinstance(v, int) or v < 0 for v in counters.values()):
            raise ValueError(f"invalid queue counters {counters!r}")
        self.version = int(state["version"])
        self.batches = int(state["batches"])
        self._next_ticket = int(state["next_ticket"])
        self.max_lag_consumed = int(state.get("max_lag_consumed", 0))
        self.counters = dict.fromkeys(_COUNTERS, 0) | counters
        self.counters["running"] = 0
        self._running = {}
        self._ready = []
        self._arrivals = 0
        for group in ready:
            self._insert(group)
