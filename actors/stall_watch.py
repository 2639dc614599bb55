"""No silent stall: between empty polls for a batch, the driver says why nothing arrives (every
trainer.stall_warn_s) and stops the job after trainer.stall_limit_s without a batch, or at once when the prompt
source names a stop reason (a group past its infrastructure-fault limit). drkernel.train.stall words it."""

from __future__ import annotations

import time
from typing import Any

from ray import serve

from actors.job_stop import JobStalled
from actors.rollout_pool import RolloutPool
from drkernel.config.train import TrainerConfig
from drkernel.log import get_logger
from drkernel.train.stall import FlowCounts, diagnose_stall

log = get_logger("train")


class StallWatch:
    """The counts of the queue, the prompt source and the rollout pool at the last batch, and the clocks since."""

    def __init__(self, queue: Any, source: Any, pool: RolloutPool | None, apps: list[str], cfg: TrainerConfig) -> None:
        self.queue, self.source, self.pool, self.apps, self.cfg = queue, source, pool, apps, cfg

    async def flow(self) -> FlowCounts:
        queue, source = await self.queue.stats.remote(), await self.source.stats.remote()
        pool = self.pool.stats() if self.pool is not None else {"workers": {}, "deaths": []}
        return FlowCounts(
            consumed=int(queue.get("consumed", 0)),
            dropped=int(queue.get("dropped", 0)),
            failed=int(source.get("failed", 0)),
            requeued=int(source.get("requeued", 0)),
            running=int(queue.get("running", 0)),
            ready=int(queue.get("ready", 0)),
            workers=len(pool["workers"]),
            worker_deaths=len(pool["deaths"]),
        )

    async def reset(self) -> None:
        """A batch arrived (or the loop starts): the clocks restart from the counts of now."""
        self._waiting_since = self._last_warn = time.monotonic()
        self._before = await self.flow()

    async def check(self) -> None:
        """After an empty poll: raise JobStalled on the source's stop reason or past the limit; else warn when due."""
        reason = await self.source.stop_reason.remote()
        if reason:
            raise JobStalled(f"stopping: {reason}")
        now, tc = time.monotonic(), self.cfg
        waited = now - self._waiting_since
        if now - self._last_warn < tc.stall_warn_s and waited < tc.stall_limit_s:
            return
        statuses = serve.status().applications
        apps = {name: str(getattr(statuses.get(name), "status", "MISSING")).split(".")[-1] for name in self.apps}
        line = diagnose_stall(self._before, await self.flow(), waited, apps)
        if waited >= tc.stall_limit_s:
            raise JobStalled(f"stopping after trainer.stall_limit_s={tc.stall_limit_s:.0f}: {line}")
        log.warning("%s", line)
        self._last_warn = now
