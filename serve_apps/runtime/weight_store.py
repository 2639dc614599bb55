"""The weight store: a small named actor per policy app holding the last published push (version, bucket refs,
manifest), so that a policy replica (re)starting while a job trains loads the weights the job has published
(serve_apps/policy_weights.py). The trainer's weight publisher (actors/weight_sync.py) writes it; both sides
find it by the name below."""

from __future__ import annotations

import time

import ray

from drkernel.types.weights import WeightsManifest

STORE_NAMESPACE = "drkernel"


def store_name(app_name: str) -> str:
    """Name of the weight store of the policy app `app_name` (in STORE_NAMESPACE)."""
    return f"{app_name}:published-weights"


@ray.remote(num_cpus=0)
class WeightStore:
    """The last published push of one policy app: version, bucket refs (kept alive here) and manifest."""

    def __init__(self) -> None:
        self._latest: tuple[int, list[ray.ObjectRef], WeightsManifest] | None = None

    def put(self, version: int, bucket_refs: list[ray.ObjectRef], manifest: WeightsManifest) -> None:
        """Name these buckets as the weights a starting replica loads (the previous ones are released)."""
        self._latest = (version, list(bucket_refs), manifest)

    def clear(self) -> None:
        self._latest = None

    def latest(self) -> tuple[int, list[ray.ObjectRef], WeightsManifest] | None:
        """(version, bucket refs, manifest), the refs nested so that callers fetch them themselves; None at
        version 0 (the weights every replica starts with)."""
        return self._latest


def weight_store(app_name: str, wait_s: float = 60.0) -> ray.actor.ActorHandle:
    """The weight store of policy app `app_name`, created if it does not exist (owned by the caller's process,
    so it goes when the trainer goes). The store of an earlier run's trainer that just died can still hold the
    name for a moment (a resumed job meets it): such a handle answers with an actor error, and the name is
    asked for again until Ray has released it."""
    deadline = time.monotonic() + wait_s
    while True:
        store = WeightStore.options(name=store_name(app_name), namespace=STORE_NAMESPACE, get_if_exists=True).remote()
        try:
            ray.get(store.latest.remote(), timeout=wait_s)
            return store
        except ray.exceptions.RayActorError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
