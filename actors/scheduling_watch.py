"""A driver thread that notices work waiting for resources the cluster does not free, in every phase of the job.

It reads the cluster's pending demand from the GCS (the autoscaler's status, as `ray status` shows it; no
dashboard needed) every few seconds. When the same demand has been pending for `warn_s` it logs what waits
against `ray.available_resources()` and what this job requested, and again every `warn_s`; after `limit_s` it
records the reason and signals the driver's main thread (SIGUSR1), which stops the job with it. Demand that
changes (something got placed, something new asked) restarts the clock: only work that makes no progress counts.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Mapping
from typing import Any

import ray

from drkernel.log import get_logger
from drkernel.train.scheduling import describe_wait

log = get_logger("train")
STOP_SIGNAL = signal.SIGUSR1


def pending_demand(gcs_address: str) -> list[tuple[dict[str, float], int]]:
    """(bundle, count) of every task, actor and placement-group bundle the cluster cannot place now."""
    from ray.autoscaler.v2.sdk import get_cluster_status

    demands = get_cluster_status(gcs_address).resource_demands
    found = []
    for demand in [*demands.ray_task_actor_demand, *demands.placement_group_demand]:
        found += [(dict(b.bundle), int(b.count)) for b in demand.bundles_by_count]
    return sorted(found, key=repr)


class SchedulingWatch:
    """Start after ray.init; `phase` names what the job is doing (for the message); `reason` is set at the limit."""

    def __init__(
        self, requests: Mapping[str, Mapping[str, float]], warn_s: float, limit_s: float, poll_s: float = 5.0
    ) -> None:
        self.requests = dict(requests)
        self.warn_s, self.limit_s, self.poll_s = warn_s, limit_s, min(poll_s, warn_s)
        self.phase = "setup"
        self.reason: str | None = None
        self._stop = threading.Event()
        self._gcs = ray.get_runtime_context().gcs_address
        self._thread = threading.Thread(target=self._loop, name="drkernel-scheduling-watch", daemon=True)

    def start(self) -> SchedulingWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        since: float | None = None
        last: Any = None
        warned = 0.0
        while not self._stop.wait(self.poll_s):
            try:
                pending = pending_demand(self._gcs)
            except Exception as e:  # a GCS hiccup is no reason to stop the job; the next poll asks again
                log.debug("scheduling watch: cluster status unavailable: %s", e)
                continue
            now = time.monotonic()
            if not pending or pending != last:
                since, last = (now if pending else None), pending
                continue
            waited = now - (since or now)
            if waited < self.warn_s or (now - warned < self.warn_s and waited < self.limit_s):
                continue
            line = describe_wait(
                waited, self.phase, pending, ray.available_resources(), ray.cluster_resources(), self.requests
            )
            if waited >= self.limit_s and not self._stop.is_set():  # never once the job is cleaning up
                self.reason = f"stopping after trainer.schedule_limit_s={self.limit_s:g}: {line}"
                log.error("%s", self.reason)
                signal.pthread_kill(threading.main_thread().ident, STOP_SIGNAL)
                return
            log.warning("%s (the job stops after trainer.schedule_limit_s=%g)", line, self.limit_s)
            warned = now
