"""The trajectory queue: an async actor around drkernel.rl.staleness, between rollout workers and the trainer.

Workers call `try_admit` before taking a prompt group, `put` (or `fail`) when it is done; the trainer calls
`get_batch` and, after each weight push, `set_version`. Every method runs on the actor's one event loop and
changes state only between awaits, so no lock exists, let alone one held across an await (verl PR #7010):
waiters park on an asyncio.Event that is replaced on every change.

The queue also relays "finished"/"failed" to the prompt source, which keeps one copy of a group when a
re-issued group is delivered twice. `state_dict` snapshots the queue and the prompt source together: new
completions are held at a gate while the source is snapshotted, so a group is in exactly one of the two
saved states (out with a worker, or finished in the queue) and a resumed job neither loses nor repeats it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import ray

from drkernel.config.train import QueueConfig
from drkernel.rl.staleness import Admission, ReleaseReason, StalenessController
from drkernel.types.group import FinishedGroup
from serve_apps.runtime.run_series import QUEUE_SERIES, RunGauges


@ray.remote(num_cpus=0)
class TrajectoryQueue:
    """Admission control, finished groups and counters; its state goes into every checkpoint."""

    def __init__(
        self,
        cfg: QueueConfig | dict[str, Any],
        steps_per_version: int = 1,
        prompt_source: ray.actor.ActorHandle | None = None,
        run: str = "",
    ):
        self.cfg = cfg if isinstance(cfg, QueueConfig) else QueueConfig.model_validate(cfg)
        self._ctl: StalenessController[FinishedGroup] = StalenessController(
            self.cfg.groups_per_step, self.cfg.max_staleness, self.cfg.on_violation, steps_per_version
        )
        self._source = prompt_source
        self._changed = asyncio.Event()
        self._gate_open = asyncio.Event()
        self._gate_open.set()
        self._completing = 0  # puts/fails whose verdict from the prompt source is on its way
        self._dropped_ids: list[str] = []
        self._dropped_log: list[dict[str, Any]] = []  # dropped groups not yet taken by `take_dropped`
        self._released_workers: set[str] = set()  # dead or stopped: never admitted again
        self._started = time.monotonic()
        self._gauges = RunGauges("queue", QUEUE_SERIES, run)

    def _notify(self) -> None:
        self._gauges.set(self._ctl.stats())
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_change(self, deadline: float | None) -> bool:
        """Wait for any state change until `deadline` (monotonic); False on timeout."""
        event = self._changed
        timeout = None if deadline is None else deadline - time.monotonic()
        if timeout is not None and timeout <= 0:
            return False
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def try_admit(self, worker_id: str, timeout_s: float = 0.0) -> Admission | None:
        """A running slot for one prompt group, waiting up to `timeout_s` for the budget to allow it. None for a
        worker whose slots were released: a call it made before it died may still be waiting here, and a slot
        it took after its release would never be given back (the trainer then waits on it for good)."""
        deadline = time.monotonic() + timeout_s
        while True:
            if worker_id in self._released_workers:
                return None
            admission = self._ctl.try_admit(worker_id)
            if admission is not None:
                self._notify()
                return admission
            if not await self._wait_change(deadline):
                return None

    async def release(self, ticket: int, reason: ReleaseReason = "unused") -> bool:
        """Give back a slot that produced no group (e.g. the prompt source was exhausted)."""
        released = self._ctl.release(ticket, reason)
        self._notify()
        return released

    async def release_worker(self, worker_id: str) -> int:
        """Free the slots of a dead or stopped worker (the pool then re-issues its groups)."""
        self._released_workers.add(worker_id)
        freed = self._ctl.release_worker(worker_id)
        self._notify()
        return len(freed)

    async def _ask_source(self, method: str, *args: Any) -> bool:
        """Relay a group's outcome to the prompt source, behind the snapshot gate (see the module doc)."""
        while not self._gate_open.is_set():
            await self._gate_open.wait()
        if self._source is None:
            return True
        self._completing += 1
        try:
            return bool(await getattr(self._source, method).remote(*args))
        finally:
            self._completing -= 1
            self._notify()

    async def put(self, group: FinishedGroup) -> bool:
        """Add a finished group; False when another copy of it was finished first (it is discarded)."""
        if not isinstance(group, FinishedGroup):
            raise TypeError(f"put expects a FinishedGroup, got {type(group).__name__}")
        if not group.trajectories:
            raise ValueError(f"group {group.group_id} has no trajectories")
        first = await self._ask_source("complete", group.group_id)
        if first:
            self._ctl.accept(group.ticket, group)
        else:
            self._ctl.release(group.ticket, "duplicate")
        self._notify()
        return first

    async def fail(self, ticket: int, group_id: str, error: str) -> bool:
        """A group that could not be sampled: its slot is freed and the prompt source reports it."""
        await self._ask_source("fail", group_id, error)
        released = self._ctl.release(ticket, "failed")
        self._notify()
        return released

    async def requeue(self, ticket: int, group_id: str, error: str, limit: int) -> bool:
        """A group failed by infrastructure faults only: its slot is freed and the prompt source puts it back
        in line (False once it has gone back `limit` times: the source then holds the job's stop reason)."""
        back = await self._ask_source("requeue", group_id, error, limit)
        self._ctl.release(ticket, "abandoned")
        self._notify()
        return back

    async def get_batch(self, batch_size: int | None = None, timeout_s: float | None = None) -> list[FinishedGroup]:
        """`batch_size` (default groups_per_step) finished groups, oldest version first; waits for them.
        Returns [] when `timeout_s` passes first, so the trainer can check its own stop conditions."""
        size = self.cfg.groups_per_step if batch_size is None else batch_size
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            batch, dropped = self._ctl.take_batch(size)
            self._dropped_ids.extend(group.group_id for group in dropped)
            self._dropped_log.extend(self._dropped_record(group) for group in dropped)
            if dropped or batch is not None:
                self._notify()  # dropped slots and consumed groups both widen admission
            if batch is not None:
                return batch
            if not await self._wait_change(deadline):
                return []

    async def set_version(self, version: int) -> None:
        """The policy version after a weight push; admission widens by one version's worth of groups."""
        self._ctl.set_version(version)
        self._notify()

    async def stats(self) -> dict[str, Any]:
        return {
            **self._ctl.stats(),
            "dropped_ids": len(self._dropped_ids),
            "uptime_s": time.monotonic() - self._started,
        }

    async def dropped_group_ids(self) -> list[str]:
        return list(self._dropped_ids)

    def _dropped_record(self, group: FinishedGroup) -> dict[str, Any]:
        lag = self._ctl.version - group.min_version
        return {
            "group_id": group.group_id,
            "task_uid": group.task_uid,
            "samples": [t.sample_index for t in group.trajectories],
            "detail": f"stale: sampled at version {group.min_version}, {lag} behind the trainer's "
            f"{self._ctl.version} (queue.max_staleness={self.cfg.max_staleness})",
        }

    async def take_dropped(self) -> list[dict[str, Any]]:
        """The groups dropped as stale since the last call, with why (the job records them per step)."""
        taken, self._dropped_log = self._dropped_log, []
        return taken

    async def state_dict(self) -> dict[str, Any]:
        """Queue and prompt-source state from one instant: completions wait at the gate meanwhile."""
        self._gate_open.clear()
        try:
            while self._completing:
                await self._wait_change(None)
            source = await self._source.state_dict.remote() if self._source is not None else None
            return {
                "controller": self._ctl.state_dict(),
                "ready": [group.to_state() for group in self._ctl.ready_groups()],
                "dropped_ids": list(self._dropped_ids),
                "prompt_source": source,
            }
        finally:
            self._gate_open.set()

    async def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from `state_dict()`; the prompt source (if attached) is restored from the same state."""
        missing = {"controller", "ready"} - set(state)
        if missing:
            raise ValueError(f"queue state lacks {sorted(missing)}")
        if self._source is not None:
            if state.get("prompt_source") is None:
                raise ValueError("queue state has no prompt-source state, but this queue has a prompt source")
            await self._source.load_state_dict.remote(state["prompt_source"])
        self._ctl.load_state_dict(state["controller"], [FinishedGroup.from_state(raw) for raw in state["ready"]])
        self._dropped_ids = list(state.get("dropped_ids", []))
        self._notify()
