"""What GET /stats reports: request and verdict counts, queue depth, latency percentiles, cache hits.

Counts are since the ingress replica started; percentiles are over the most recent evaluations
(a bounded window, so memory stays flat under any load). Each event is recorded once, here, and fed on to the
ingress's Prometheus metrics when it has them, so /stats and the dashboard cannot drift apart.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from typing import TYPE_CHECKING

from drkernel.types.verify_result import VerifyResult

if TYPE_CHECKING:
    from serve_apps.verifier_metrics import VerifierMetrics


def verdict_of(result: VerifyResult) -> str:
    """One label per result: correct, hack, infra_error, or the error kind that failed it."""
    if result.status == "infra_error":
        return "infra_error"
    if result.hack is not None:
        return "hack"
    if result.correct:
        return "correct"
    return result.error.kind if result.error is not None else "incorrect"


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an already sorted list (None when empty)."""
    if not sorted_values:
        return None
    rank = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[rank]


class VerifierStats:
    """Counters of one ingress replica; touched only from its event loop."""

    def __init__(self, window: int = 10_000, metrics: VerifierMetrics | None = None) -> None:
        self.metrics = metrics
        self.started = time.time()
        self.requests: Counter[str] = Counter()
        self.responses: Counter[int] = Counter()
        self.verdicts: Counter[str] = Counter()
        self.evaluations = 0
        self.cache_hits = 0
        self.replica_retries = 0
        self.queue_depth = 0
        self.max_queue_depth = 0
        self._latencies: deque[float] = deque(maxlen=window)

    def request(self, route: str) -> None:
        self.requests[route] += 1
        if self.metrics is not None:
            self.metrics.requests.inc(tags={"route": route})

    def response(self, status_code: int) -> None:
        self.responses[status_code] += 1
        if self.metrics is not None and status_code >= 400:
            self.metrics.rejected.inc(tags={"code": str(status_code)})

    def enter_queue(self, n: int) -> None:
        self.queue_depth += n
        self.max_queue_depth = max(self.max_queue_depth, self.queue_depth)
        self._gauge()

    def leave_queue(self, n: int) -> None:
        self.queue_depth -= n
        self._gauge()

    def _gauge(self) -> None:
        if self.metrics is not None:
            self.metrics.queue_depth.set(self.queue_depth)

    def record(self, result: VerifyResult, cache_hit: bool, latency_s: float) -> None:
        """One answered evaluation. Only its latency goes on to the metrics: the replicas count verdicts and
        cache hits there (for handle callers too)."""
        self.evaluations += 1
        self.cache_hits += int(cache_hit)
        self.verdicts[verdict_of(result)] += 1
        self._latencies.append(latency_s)
        if self.metrics is not None:
            self.metrics.latency.observe(latency_s)

    def snapshot(self, queue_limit: int) -> dict:
        lat = sorted(self._latencies)
        return {
            "uptime_s": round(time.time() - self.started, 3),
            "requests": dict(self.requests),
            "responses": {str(k): v for k, v in sorted(self.responses.items())},
            "evaluations": self.evaluations,
            "verdicts": dict(self.verdicts),
            "cache_hits": self.cache_hits,
            "replica_retries": self.replica_retries,
            "queue": {"depth": self.queue_depth, "max_depth": self.max_queue_depth, "limit": queue_limit},
            "latency_s": {f"p{q}": percentile(lat, q) for q in (50, 90, 99)} | {"count": len(lat)},
        }
