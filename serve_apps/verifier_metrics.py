"""Verifier metrics for the Ray dashboard (Prometheus names start with `ray_drkernel_verifier_`).

Serve's metric classes add the deployment, replica and application tags. The verifier replicas
count every evaluation (HTTP or handle callers): verdicts, cache hits, latency, in-flight depth.
The HTTP ingress counts requests by route, refusals by status code, end-to-end latency and the
depth of its admission queue; filter by `deployment` to read one or the other.
"""

from __future__ import annotations

from ray.serve import metrics

from drkernel.types.verify_result import VerifyResult
from serve_apps.verifier_stats import verdict_of

LATENCY_BOUNDARIES_S = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 180, 600]


class VerifierMetrics:
    """Counters, a latency histogram and a queue-depth gauge, created once per replica."""

    def __init__(self) -> None:
        self.requests = metrics.Counter(
            "drkernel_verifier_requests", description="verification requests received", tag_keys=("route",)
        )
        self.verdicts = metrics.Counter(
            "drkernel_verifier_verdicts", description="results by verdict kind", tag_keys=("verdict",)
        )
        self.cache_hits = metrics.Counter(
            "drkernel_verifier_cache_hits", description="results served without a new evaluation"
        )
        self.rejected = metrics.Counter(
            "drkernel_verifier_rejected", description="requests refused (status code)", tag_keys=("code",)
        )
        self.latency = metrics.Histogram(
            "drkernel_verifier_latency_s",
            description="seconds from admission to result",
            boundaries=LATENCY_BOUNDARIES_S,
        )
        self.queue_depth = metrics.Gauge(
            "drkernel_verifier_queue_depth", description="evaluations admitted and not yet answered"
        )

    def record(self, result: VerifyResult, cache_hit: bool, latency_s: float) -> None:
        self.verdicts.inc(tags={"verdict": verdict_of(result)})
        if cache_hit:
            self.cache_hits.inc()
        self.latency.observe(latency_s)
