"""WeightPublisher against real Ray actors and a real Serve deployment (stand-in receivers exposing the
policy replica's load_weights/state_checksum contract): bit identity, all-acks-or-no-version, clear errors."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest
import ray
import torch
from ray import serve

from actors.weight_sync import ActorReplicas, ServeReplicas, WeightPublisher, WeightPushError
from drkernel.model.weights import state_checksum, unpack_into

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import a test module


def _source(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "embed.weight": torch.randn(1100, 256, generator=g),
        "layer.0.w": torch.randn(64, 64, generator=g),
        "layer.0.b": torch.randn(64, generator=g),
        "norm.half": torch.randn(64, generator=g).to(torch.bfloat16),
    }


def _template(state: dict[str, torch.Tensor]) -> dict[str, tuple[list[int], str]]:
    return {k: (list(v.shape), str(v.dtype).removeprefix("torch.")) for k, v in state.items()}


def _zeros(template) -> dict[str, torch.Tensor]:
    return {k: torch.zeros(shape, dtype=getattr(torch, dtype)) for k, (shape, dtype) in template.items()}


@ray.remote(num_cpus=0)
class Receiver:
    """Holds parameters and loads pushes like a policy replica; `mode` makes it fail for the error tests."""

    def __init__(self, template) -> None:
        self.reset(template, "ok")

    def reset(self, template, mode: str) -> None:
        self.params = _zeros(template)
        self.mode = mode
        self.version = 0

    def load_weights(self, version, bucket_refs, manifest):
        if self.mode == "raise":
            raise RuntimeError("replica out of memory while loading")
        if self.mode == "hang":
            time.sleep(3)
        unpack_into(self.params, ray.get(bucket_refs), manifest)
        self.version = version
        return {"version": version, "replica": "actor", "get_s": 0.0, "load_s": 0.0}

    def state_checksum(self) -> str:
        return state_checksum(self.params)

    def current_version(self) -> int:
        return self.version


@serve.deployment(num_replicas=2, ray_actor_options={"num_cpus": 0})
class ServeSink:
    def __init__(self, template) -> None:
        self.params = _zeros(template)

    async def load_weights(self, version, bucket_refs, manifest):
        buckets = list(await asyncio.gather(*bucket_refs))
        unpack_into(self.params, buckets, manifest)
        return {"version": version, "replica": serve.get_replica_context().replica_tag}

    async def state_checksum(self) -> str:
        return state_checksum(self.params)


@pytest.fixture(scope="module")
def receivers(ray_cluster):
    """Two receiver actors for the whole module: each costs seconds of torch import on a busy host."""
    actors = [Receiver.remote(_template(_source(0))) for _ in range(2)]
    yield actors
    for actor in actors:
        ray.kill(actor)


def test_push_to_actors_is_bit_identical_and_advances_the_version(receivers):
    src = _source(0)
    ray.get([r.reset.remote(_template(src), "ok") for r in receivers])
    publisher = WeightPublisher(ActorReplicas(receivers), bucket_mb=1)  # the 1.1 MB embedding gets a bucket of its own
    report = publisher.publish(src)
    assert publisher.version == 1 and report.version == 1 and report.replicas == 2 and report.buckets == 2
    assert report.bytes == sum(v.numel() * v.element_size() for v in src.values())
    assert all(getattr(report, k) >= 0 for k in ("pack_s", "put_s", "load_s", "free_s")) and report.total_s > 0
    assert ray.get([r.state_checksum.remote() for r in receivers]) == [state_checksum(src)] * 2
    src2 = _source(1)
    publisher.publish(src2)
    assert publisher.version == 2 and ray.get(receivers[0].current_version.remote()) == 2
    assert ray.get([r.state_checksum.remote() for r in receivers]) == [state_checksum(src2)] * 2


def test_a_replica_that_fails_or_hangs_keeps_the_version(receivers):
    src = _source(2)
    good, bad = receivers
    ray.get([good.reset.remote(_template(src), "ok"), bad.reset.remote(_template(src), "raise")])
    publisher = WeightPublisher(ActorReplicas([good, bad]), bucket_mb=1)
    with pytest.raises(WeightPushError, match=r"version 1 not published \(still 0\): 1 of 2 .*out of memory"):
        publisher.publish(src)
    assert publisher.version == 0
    ray.get(bad.reset.remote(_template(src), "hang"))
    slow = WeightPublisher(ActorReplicas([good, bad]), bucket_mb=1, timeout_s=1.0)
    with pytest.raises(
        WeightPushError, match=r"1 of 2 replicas acknowledged after 1 attempt\(s\); TimeoutError: no acknowledgement"
    ):
        slow.publish(src)
    assert slow.version == 0
    ray.get(bad.reset.remote({"other": ([3], "float32")}, "ok"))  # waits out the hang
    with pytest.raises(WeightPushError, match="does not match the model"):
        WeightPublisher(ActorReplicas([bad])).publish(src)


def test_serve_broadcast_reaches_every_replica_and_counts_them(ray_cluster):
    src = _source(3)
    serve.run(ServeSink.bind(_template(src)), name="weight-sync-test", route_prefix=None)
    try:
        handle = serve.get_deployment_handle("ServeSink", app_name="weight-sync-test")
        publisher = WeightPublisher(ServeReplicas(handle, num_replicas=2), bucket_mb=1)
        report = publisher.publish(src)
        assert report.replicas == 2 and len({a["replica"] for a in report.acks}) == 2
        assert handle.broadcast("state_checksum").results(timeout_s=30) == [state_checksum(src)] * 2
        expecting_three = WeightPublisher(ServeReplicas(handle, num_replicas=3), bucket_mb=1, version=1, timeout_s=3)
        with pytest.raises(WeightPushError, match="2 of 3 replicas acknowledged"):
            expecting_three.publish(_source(4))
        assert expecting_three.version == 1
    finally:
        serve.delete("weight-sync-test")
