"""A bounded, per-replica result cache keyed by the content of an evaluation.

Repeated submissions (retries, duplicate samples in a group, replays) cost nothing: a finished
result is served from an LRU, and a request identical to one still running waits for that run
instead of starting a second. Only verdicts are cached; infra errors and timeouts are not (a
timeout may come from load rather than from the candidate), so a retry can succeed. An evaluation
whose last waiter has gone is cancelled (a queued one never starts). The cache lives in one
replica's memory: another replica may evaluate the same payload once more.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from drkernel.config.verifier import VerifyOptions
from drkernel.types.verify_result import VerifyResult


def content_key(reference: str, candidate: str, options: VerifyOptions) -> str:
    """sha256 of everything that changes a verdict (which options were set explicitly matters too:
    the core picks device-specific defaults for the ones left unset)."""
    explicit = sorted(options.model_fields_set)
    payload = json.dumps([reference, candidate, options.model_dump(mode="json"), explicit], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


class ResultCache:
    """LRU of finished verdicts plus single-flight of running ones; use from one event loop."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._done: OrderedDict[str, VerifyResult] = OrderedDict()
        self._running: dict[str, asyncio.Task[VerifyResult]] = {}
        self._waiters: dict[str, int] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._done)

    async def get_or_compute(
        self, key: str, compute: Callable[[], Awaitable[VerifyResult]]
    ) -> tuple[VerifyResult, bool]:
        """The result for `key` and whether it came without starting a new evaluation.

        The evaluation runs as its own task, so a caller that goes away (client disconnect)
        does not cancel it for the others waiting on the same key; when the last one goes, it is cancelled.
        """
        if key in self._done:
            self._done.move_to_end(key)
            self.hits += 1
            return self._done[key].model_copy(deep=True), True
        task = self._running.get(key)
        hit = task is not None
        if task is None:
            self.misses += 1
            task = asyncio.ensure_future(compute())
            self._running[key] = task
            task.add_done_callback(lambda t: self._finish(key, t))
        else:
            self.hits += 1
        self._waiters[key] = self._waiters.get(key, 0) + 1
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if self._waiters[key] == 1 and not task.done():
                task.cancel()
                self._running.pop(key, None)  # a later identical request starts afresh
            raise
        finally:
            self._waiters[key] -= 1
            if not self._waiters[key]:
                del self._waiters[key]
        return result.model_copy(deep=True), hit

    def _finish(self, key: str, task: asyncio.Task[VerifyResult]) -> None:
        if self._running.get(key) is task:
            del self._running[key]
        if task.cancelled() or task.exception() is not None:
            return
        result = task.result()
        timed_out = result.error is not None and result.error.kind == "timeout"
        if result.status == "ok" and not timed_out and self.capacity > 0:
            self._done[key] = result
            while len(self._done) > self.capacity:
                self._done.popitem(last=False)
