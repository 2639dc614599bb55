"""Settings of the verifier Serve application: devices, scaling, queue bounds, HTTP limits.

The same model validates the `args` of a Serve config file (`serve run configs/serve_verifier.yaml`)
and the flags of `drkernel serve verifier`, so both ways of starting the app agree.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from drkernel.config.base import StrictModel
from drkernel.placement import ray_options


class AutoscalingSettings(StrictModel):
    """How many verifier replicas (one device each) Serve keeps, driven by ongoing requests."""

    min_replicas: int = Field(1, ge=0, description="fewest verifier replicas (0 lets Serve scale to zero)")
    max_replicas: int = Field(1, ge=1, description="most verifier replicas; at most one per device")
    initial_replicas: int | None = Field(None, ge=0, description="replicas at start; null means min_replicas")
    target_ongoing_requests: float = Field(2.0, gt=0, description="ongoing requests per replica Serve aims for")
    upscale_delay_s: float = Field(5.0, ge=0, description="load must stay high this long before adding a replica")
    downscale_delay_s: float = Field(120.0, ge=0, description="load must stay low this long before removing one")

    @model_validator(mode="after")
    def _ordered(self) -> AutoscalingSettings:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) > max_replicas ({self.max_replicas})")
        return self

    def to_serve(self) -> dict[str, Any]:
        """The `autoscaling_config` dict Serve expects."""
        out = self.model_dump()
        if out["initial_replicas"] is None:
            del out["initial_replicas"]
        return out


class VerifierServeConfig(StrictModel):
    """Everything the verifier app needs; unknown keys are errors."""

    device: Literal["cpu", "cuda", "npu"] = Field("cpu", description="device kind each verifier replica owns")
    max_concurrency: int = Field(2, ge=1, le=64, description="evaluations compiling/checking at once per replica")
    spares: int | None = Field(
        None, ge=0, le=64, description="evaluation groups forked ahead; None: the device's default (README: 'Spares')"
    )
    cpus_per_replica: float = Field(1.0, ge=0, description="Ray CPUs reserved by one verifier replica")
    accelerators_per_replica: float = Field(1.0, gt=0, le=1, description="GPU/NPU share of one replica (<1: shared)")
    autoscaling: AutoscalingSettings = Field(default_factory=AutoscalingSettings, description="replica scaling")
    max_ongoing_requests: int = Field(8, ge=1, description="requests one verifier replica accepts at once")
    max_queued_requests: int = Field(64, ge=1, description="requests waiting for a replica before 503")
    retry_after_s: float = Field(2.0, ge=0, description="Retry-After seconds sent with a 503")
    cache_size: int = Field(4096, ge=0, description="results kept per replica (LRU by content hash; 0 = off)")
    max_body_bytes: int = Field(1_048_576, ge=1024, description="largest accepted HTTP body (413 above)")
    max_code_chars: int = Field(100_000, ge=100, description="longest reference_code / kernel_code accepted")
    max_batch: int = Field(64, ge=1, description="most items in one POST /verify/batch")
    queue_limit: int = Field(128, ge=1, description="evaluations the HTTP ingress admits at once (503 above)")
    deadline_s: float = Field(900.0, gt=0, description="longest an HTTP request waits for its results (504)")
    body_timeout_s: float = Field(30.0, gt=0, le=600, description="longest the ingress waits for a request body (408)")
    max_client_share: float = Field(
        0.5, gt=0, le=1, description="most of queue_limit and of the replicas' request slots one client may hold"
    )
    handle_reserve: float = Field(
        0.25, ge=0, lt=1, description="share of replica request slots kept free of HTTP work for handle callers"
    )
    replica_retries: int = Field(2, ge=0, le=10, description="re-sends of a request whose replica died")
    api_token_env: str = Field(
        "DRKERNEL_API_TOKEN", description="env var holding the bearer token(s), comma-separated, one per client"
    )

    @property
    def dispatch_limit(self) -> int:
        """HTTP evaluations the ingress sends to the replicas at once; the rest of their request slots
        (`handle_reserve`) stays free for in-cluster handle callers such as the trainer."""
        slots = self.autoscaling.max_replicas * self.max_ongoing_requests
        return max(1, int((1 - self.handle_reserve) * slots))

    @property
    def client_admission_limit(self) -> int:
        """Evaluations one client may have admitted at once (503 beyond)."""
        return max(1, int(self.max_client_share * self.queue_limit))

    @property
    def client_dispatch_limit(self) -> int:
        """Evaluations of one client at the replicas at once: the others always find free slots."""
        return max(1, int(self.max_client_share * self.dispatch_limit))

    @model_validator(mode="after")
    def _batch_fits_a_share(self) -> VerifierServeConfig:
        if self.max_batch > self.client_admission_limit:
            raise ValueError(
                f"max_batch ({self.max_batch}) exceeds one client's share of queue_limit "
                f"({self.client_admission_limit} = max_client_share x queue_limit): such a batch could never run"
            )
        return self

    def replica_actor_options(self) -> dict[str, Any]:
        """Ray resources of one verifier replica: its CPUs and its share of one device."""
        return ray_options(self.device, self.cpus_per_replica, self.accelerators_per_replica)
