"""Bodies of the verifier HTTP API; unknown fields are rejected so a typo is never ignored."""

from __future__ import annotations

from pydantic import Field, model_validator

from drkernel.config.base import StrictModel
from drkernel.config.verifier import VerifyOptions
from drkernel.rl.rewards import RewardConfig, score
from drkernel.types.verify_result import VerifyResult


class VerifyRequest(StrictModel):
    """One evaluation: the reference module, the candidate module and how to judge it."""

    reference_code: str = Field(..., min_length=1, description="PyTorch reference (KernelBench format)")
    kernel_code: str = Field(..., min_length=1, description="candidate source defining <entry_point>New")
    entry_point: str = Field("Model", min_length=1, description="reference class name")
    options: VerifyOptions = Field(default_factory=VerifyOptions, description="evaluation options")
    reward: RewardConfig = Field(
        default_factory=RewardConfig,
        description="how the verdict is priced (here at the front: verdicts are cached unpriced)",
    )

    @model_validator(mode="after")
    def _one_entry_point(self) -> VerifyRequest:
        if "entry_point" in self.options.model_fields_set and self.options.entry_point != self.entry_point:
            raise ValueError(
                f"options.entry_point ({self.options.entry_point!r}) contradicts entry_point "
                f"({self.entry_point!r}); set only entry_point"
            )
        return self

    def resolved_options(self) -> VerifyOptions:
        """The options with the request's entry point filled in."""
        return self.options.model_copy(update={"entry_point": self.entry_point})


class BatchRequest(StrictModel):
    """Several evaluations, run concurrently; results come back in request order."""

    items: list[VerifyRequest] = Field(..., min_length=1, description="the evaluations")


class VerifyResponse(VerifyResult):
    """What the HTTP front and `drkernel verify --json` answer: the verdict and its reward. Verdicts carry no reward
    (the replicas cache them for every reward setting); the front prices each one with the request's config."""

    reward: float = Field(..., description="the verdict priced by drkernel.rl.rewards.score under the request's config")

    @classmethod
    def priced(cls, result: VerifyResult, cfg: RewardConfig) -> VerifyResponse:
        return cls.model_validate({**result.model_dump(), "reward": score(result, cfg)})


class BatchResponse(StrictModel):
    results: list[VerifyResponse] = Field(..., description="one result per item, in request order")


class Health(StrictModel):
    status: str = Field(..., description="'ok' while the ingress answers")
    device: str = Field(..., description="device kind of the verifier replicas")
    queue_depth: int = Field(..., description="evaluations admitted and not yet answered")


class QueueStats(StrictModel):
    depth: int
    max_depth: int
    limit: int


class LatencyStats(StrictModel):
    p50: float | None
    p90: float | None
    p99: float | None
    count: int


class ReplicaLoad(StrictModel):
    """One verifier replica's evaluations: waiting for a slot, in the core, and abandoned but still running."""

    replica: str = Field(..., description="Serve replica id")
    cache_entries: int
    cache_hits: int
    cache_misses: int
    in_flight: int = Field(..., description="requests being answered, cache hits and waiters included")
    waiting: int = Field(..., description="evaluations waiting for a slot (their clock has not started)")
    running: int = Field(..., description="evaluations in the core, orphans included")
    orphaned: int = Field(..., description="running evaluations nobody waits for; they hold a slot until they end")
    started: int = Field(..., description="evaluations that got a slot and ran in the core since the replica started")
    slots: int = Field(..., description="evaluations the replica runs at once (max_concurrency)")
    task_calls: dict[str, int] = Field(
        ..., description="calls per task digest routed to this replica (task affinity), its most recent tasks"
    )


class Stats(StrictModel):
    """Counters of this ingress replica since it started."""

    uptime_s: float
    requests: dict[str, int] = Field(..., description="HTTP requests by route; unknown paths count as 'other'")
    responses: dict[str, int] = Field(..., description="HTTP responses by status code")
    evaluations: int = Field(..., description="results returned (single and batch items)")
    verdicts: dict[str, int] = Field(..., description="results by verdict: correct, hack, infra_error, error kind")
    cache_hits: int = Field(..., description="results served without a new evaluation")
    replica_retries: int = Field(..., description="requests re-sent because their replica died")
    queue: QueueStats
    latency_s: LatencyStats
    dispatched: int = Field(..., description="evaluations sent to the replicas and not yet answered")
    clients: int = Field(..., description="clients (tokens or peers) with evaluations admitted")
    replica: ReplicaLoad | None = Field(..., description="load of the replica that answered (null when all busy)")
