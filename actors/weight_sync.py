"""Publishing trainer weights to every policy replica over Ray's object store.

One push: pack the state dict into flat uint8 buckets (drkernel.model.weights.BucketPacker, staging buffers
reused across pushes) -> one `ray.put` per bucket -> `load_weights(version, bucket_refs, manifest)` on EVERY
replica -> wait for all acknowledgements -> only then advance the version -> drop the refs so the object
store frees the bytes. The refs travel nested in a list, so Ray does not resolve them in transit: each
replica fetches them itself (zero-copy on its node) and copies them into its parameters.

How every replica is reached (a routed `handle.remote` would hit one replica): the Serve policy deployment
is addressed with `DeploymentHandle.broadcast`, which fans one call out to each running replica
(ServeReplicas); plain actor handles are addressed one by one (ActorReplicas). Either way the publisher
knows how many replicas must answer: broadcast reaches only the replicas alive at that moment, so a
crashed replica shows up as a missing acknowledgement, and the version does not advance.

Replicas die and restart while a job runs. A push that meets a replica dying or starting (the replica's actor
died, it is unavailable, the deployment has no running replica, or fewer replicas answered than expected) is
re-broadcast until every replica acknowledged or `timeout_s` has passed; a replica that already holds the
version acknowledges a repeat without copying. Any other failure (a replica raising while loading, a hang past
the timeout) ends the push at once. With a WeightStore attached (serve_apps/runtime/weight_store.py), the
push's buckets stay in the object store until the next version is published, and the store names them, so a
replica that (re)starts loads the last published weights before it serves (serve_apps/policy_weights.py): the
store is written before the broadcast, and put back to the previous version if the push fails.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import ray
import torch
from ray.exceptions import RayActorError
from ray.serve.exceptions import DeploymentUnavailableError

from drkernel.model.weights import BucketPacker
from drkernel.types.weights import WeightsManifest

log = logging.getLogger(__name__)

# A replica dying, restarting or not yet running: the push is retried (ActorUnavailableError is a RayActorError).
REPLICA_CHURN = (RayActorError, DeploymentUnavailableError)


class WeightPushError(RuntimeError):
    """Not every replica acknowledged a push; the published version did not advance."""


class ReplicaSet(Protocol):
    """Where pushes go: `expected` replicas, each answering `load_weights` with an ack dict."""

    expected: int

    def load_weights(
        self, version: int, bucket_refs: list[ray.ObjectRef], manifest: WeightsManifest, timeout_s: float
    ) -> list[Any]:
        """One result per replica reached: its ack dict, or the exception it raised."""
        ...


class ServeReplicas:
    """Every replica of a Serve deployment (e.g. the policy's PolicyReplica), through handle.broadcast."""

    def __init__(self, handle: Any, num_replicas: int) -> None:
        if num_replicas < 1:
            raise ValueError(f"num_replicas must be >= 1, got {num_replicas}")
        self.handle = handle
        self.expected = num_replicas

    def load_weights(
        self, version: int, bucket_refs: list[ray.ObjectRef], manifest: WeightsManifest, timeout_s: float
    ) -> list[Any]:
        try:  # no running replica raises DeploymentUnavailableError here: a result like any replica's failure
            response = self.handle.broadcast("load_weights", version, bucket_refs, manifest)
            return response.results(timeout_s=timeout_s, return_exceptions=True)
        except Exception as e:
            return [e]


class ActorReplicas:
    """Plain Ray actors exposing `load_weights(version, bucket_refs, manifest) -> ack`."""

    def __init__(self, handles: Sequence[Any]) -> None:
        if not handles:
            raise ValueError("ActorReplicas needs at least one actor handle")
        self.handles = list(handles)
        self.expected = len(self.handles)

    def load_weights(
        self, version: int, bucket_refs: list[ray.ObjectRef], manifest: WeightsManifest, timeout_s: float
    ) -> list[Any]:
        calls = [h.load_weights.remote(version, bucket_refs, manifest) for h in self.handles]
        done, pending = ray.wait(calls, num_returns=len(calls), timeout=timeout_s)
        results: list[Any] = []
        for call in calls:
            if call in pending:
                results.append(TimeoutError(f"no acknowledgement within {timeout_s:.1f}s"))
                continue
            try:
                results.append(ray.get(call))
            except Exception as e:  # a replica's failure is reported, not raised here
                results.append(e)
        for call in pending:
            ray.cancel(call)
        return results


@dataclass
class PushReport:
    """What one push moved and how long each phase took (seconds)."""

    version: int
    bytes: int
    buckets: int
    replicas: int
    pack_s: float
    put_s: float
    load_s: float  # from the calls until every replica acknowledged
    free_s: float
    total_s: float
    attempts: int  # broadcasts until every replica acknowledged (> 1 when one was dying or starting)
    replica_get_s: float  # slowest replica's fetch of the buckets (when its ack reports it)
    replica_load_s: float  # slowest replica's copy into its parameters
    acks: list[dict[str, Any]] = field(default_factory=list)

    def metrics(self) -> dict[str, float]:
        return {f"weight_sync/{k}": float(v) for k, v in vars(self).items() if k != "acks"}


def _describe(result: Any) -> str:
    text = str(result).strip().splitlines()
    return f"{type(result).__name__}: {text[-1] if text else ''}"[:300]


class WeightPublisher:
    """Pushes state dicts as versions 1, 2, ... (version 0 = the weights every replica started from).

    `store` (a WeightStore): where a (re)starting replica finds the last published weights; None keeps no copy.
    """

    def __init__(
        self,
        replicas: ReplicaSet,
        bucket_mb: int = 512,
        version: int = 0,
        timeout_s: float = 300.0,
        pin_memory: bool | None = None,
        store: ray.actor.ActorHandle | None = None,
        retry_backoff_s: float = 0.5,
    ) -> None:
        if bucket_mb < 1 or timeout_s <= 0 or version < 0 or retry_backoff_s <= 0:
            raise ValueError(
                f"bad publisher settings: bucket_mb={bucket_mb}, timeout_s={timeout_s}, version={version}, "
                f"retry_backoff_s={retry_backoff_s}"
            )
        self.replicas = replicas
        self.packer = BucketPacker(bucket_mb << 20, pin_memory=pin_memory)
        self.version = version
        self.timeout_s = timeout_s
        self.store = store
        self.retry_backoff_s = retry_backoff_s
        self._published: tuple[int, list[ray.ObjectRef], WeightsManifest] | None = None  # what the store names

    def _broadcast(
        self, version: int, refs: list[ray.ObjectRef], manifest: WeightsManifest
    ) -> tuple[list[dict[str, Any]], list[str], int]:
        """Broadcast until every replica acknowledged, re-broadcasting while failures are replica churn only.
        Returns (acks, failures of the last attempt, attempts)."""
        deadline = time.monotonic() + self.timeout_s
        backoff = self.retry_backoff_s
        attempt = 0
        while True:
            attempt += 1
            remaining = max(deadline - time.monotonic(), 0.1)
            results = self.replicas.load_weights(version, refs, manifest, remaining)
            acks = [r for r in results if isinstance(r, dict) and r.get("version") == version]
            bad = [r for r in results if not (isinstance(r, dict) and r.get("version") == version)]
            failures = [_describe(r) if isinstance(r, BaseException) else f"bad ack {r!r}"[:300] for r in bad]
            if not bad and len(acks) >= self.replicas.expected:
                return acks, failures, attempt
            churn = all(isinstance(r, REPLICA_CHURN) for r in bad)
            if not churn or time.monotonic() + backoff >= deadline:
                return acks, failures, attempt
            log.warning(
                "weights version %d: %d of %d replicas acknowledged (%s); a replica is dying or starting, "
                "broadcasting again in %.1fs",
                version,
                len(acks),
                self.replicas.expected,
                "; ".join(failures) or "no error",
                backoff,
            )
            time.sleep(backoff)
            backoff = min(2 * backoff, 5.0)

    def publish(self, state_dict: Mapping[str, torch.Tensor]) -> PushReport:
        """Push `state_dict` as version + 1; the version advances only when every replica acknowledged it.

        Raises WeightPushError naming each replica that failed or the count that did not answer.
        """
        start = time.perf_counter()
        version = self.version + 1
        buckets, manifest = self.packer.pack(state_dict, version)
        packed = time.perf_counter()
        refs = [ray.put(b) for b in buckets]
        del buckets  # the numpy views alias the reused staging buffers; the object store holds its copies
        put = time.perf_counter()
        if self.store is not None:  # before the broadcast: a replica starting meanwhile must find this version
            ray.get(self.store.put.remote(version, refs, manifest))
        acks: list[dict[str, Any]] = []
        failures: list[str] = ["no broadcast"]
        attempts = 0
        try:
            acks, failures, attempts = self._broadcast(version, refs, manifest)
        finally:
            loaded = time.perf_counter()
            published = not failures and len(acks) >= self.replicas.expected
            if published and self.store is not None:
                self._published = (version, refs, manifest)  # the previous version's buckets are freed now
            elif self.store is not None:  # a starting replica must not load weights that were never published
                ray.get(self.store.put.remote(*self._published) if self._published else self.store.clear.remote())
            del refs
            freed = time.perf_counter()
        if not published:
            raise WeightPushError(
                f"weights version {version} not published (still {self.version}): {len(acks)} of "
                f"{self.replicas.expected} replicas acknowledged after {attempts} attempt(s)"
                + ("; " + "; ".join(failures) if failures else "")
            )
        self.version = version

        def slowest(key: str) -> float:
            return max((float(a.get(key, 0.0)) for a in acks), default=0.0)

        return PushReport(
            version=version,
            bytes=manifest.total_bytes,
            buckets=len(manifest.bucket_nbytes),
            replicas=len(acks),
            pack_s=packed - start,
            put_s=put - packed,
            load_s=loaded - put,
            free_s=freed - loaded,
            total_s=time.perf_counter() - start,
            attempts=attempts,
            replica_get_s=slowest("get_s"),
            replica_load_s=slowest("load_s"),
            acks=acks,
        )
