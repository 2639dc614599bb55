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
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import ray
import torch

from drkernel.model.weights import BucketPacker, WeightsManifest


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
        response = self.handle.broadcast("load_weights", version, bucket_refs, manifest)
        try:
            return response.results(timeout_s=timeout_s, return_exceptions=True)
        except TimeoutError as e:
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
    replica_get_s: float  # slowest replica's fetch of the buckets (when its ack reports it)
    replica_load_s: float  # slowest replica's copy into its parameters
    acks: list[dict[str, Any]] = field(default_factory=list)

    def metrics(self) -> dict[str, float]:
        return {f"weight_sync/{k}": float(v) for k, v in vars(self).items() if k != "acks"}


def _describe(result: Any) -> str:
    text = str(result).strip().splitlines()
    return f"{type(result).__name__}: {text[-1] if text else ''}"[:300]


class WeightPublisher:
    """Pushes state dicts as versions 1, 2, ... (version 0 = the weights every replica started from)."""

    def __init__(
        self,
        replicas: ReplicaSet,
        bucket_mb: int = 512,
        version: int = 0,
        timeout_s: float = 300.0,
        pin_memory: bool | None = None,
    ) -> None:
        if bucket_mb < 1 or timeout_s <= 0 or version < 0:
            raise ValueError(f"bad publisher settings: bucket_mb={bucket_mb}, timeout_s={timeout_s}, version={version}")
        self.replicas = replicas
        self.packer = BucketPacker(bucket_mb << 20, pin_memory=pin_memory)
        self.version = version
        self.timeout_s = timeout_s

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
        try:
            results = self.replicas.load_weights(version, refs, manifest, self.timeout_s)
        finally:
            loaded = time.perf_counter()
            del refs
            freed = time.perf_counter()
        acks = [r for r in results if isinstance(r, dict) and r.get("version") == version]
        failures = [
            _describe(r) if isinstance(r, BaseException) else f"bad ack {r!r}"[:300]
            for r in results
            if not (isinstance(r, dict) and r.get("version") == version)
        ]
        if failures or len(acks) < self.replicas.expected:
            raise WeightPushError(
                f"weights version {version} not published (still {self.version}): {len(acks)} of "
                f"{self.replicas.expected} replicas acknowledged" + ("; " + "; ".join(failures) if failures else "")
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
            replica_get_s=slowest("get_s"),
            replica_load_s=slowest("load_s"),
            acks=acks,
        )
