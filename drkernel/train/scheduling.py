"""Whether the job fits the cluster, and what to say when its work waits for resources nobody frees.

A Ray task or actor whose resources are not free waits without a word: on a 2-CPU `ray start --head` the demo's
actors took 1.75 CPUs and the prompt stream's 1-CPU read task waited for ever. So the job (1) sizes the read tasks
to what its own actors leave (`fit_read_cpus`), refusing only when even the floor does not fit, and (2) watches
the cluster's pending demand (actors/scheduling_watch.py) and reports it with `describe_wait`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from drkernel.placement import ray_options

if TYPE_CHECKING:
    from drkernel.config.train import TrainConfig


class ClusterTooSmall(RuntimeError):
    """The job's actors and the least read share do not fit the cluster's CPUs."""


def fit_read_cpus(cluster_cpus: float, actor_cpus: float, wanted: float, floor: float) -> float:
    """CPUs for each prompt-read task: `wanted`, else what the cluster has left after the job's actors (at least
    `floor`). Raises ClusterTooSmall naming both numbers when not even `floor` is left."""
    left = round(cluster_cpus - actor_cpus, 6)
    if left >= wanted:
        return wanted
    if left >= floor:
        return left
    raise ClusterTooSmall(
        f"this job reserves {actor_cpus:g} CPUs for its actors and replicas plus at least "
        f"rl_data.read_cpus_floor={floor:g} for reading prompts ({actor_cpus + floor:g} in all), but the cluster "
        f"has {cluster_cpus:g} CPUs: lower policy.cpus_per_replica, verifier.cpus_per_replica, "
        "trainer.cpus_per_worker or rollout.cpus_per_worker, or add a node"
    )


def _fmt(resources: Mapping[str, float]) -> str:
    shown = {k: v for k, v in sorted(resources.items()) if not k.startswith(("node:", "memory", "object_store"))}
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in shown.items()) + "}"


def describe_wait(
    waited_s: float,
    phase: str,
    pending: Sequence[tuple[Mapping[str, float], int]],
    available: Mapping[str, float],
    total: Mapping[str, float],
    requests: Mapping[str, Mapping[str, float]],
) -> str:
    """One line: what has waited how long, what the job asked for, what the cluster has free."""
    waiting = ", ".join(f"{count} x {_fmt(bundle)}" for bundle, count in pending)
    asked = "; ".join(f"{part} {_fmt(res)}" for part, res in requests.items())
    free = {k: available.get(k, 0.0) for k in total}  # Ray leaves out what is used up: say 0
    return (
        f"work has waited {waited_s:.0f}s for resources (phase: {phase}): pending {waiting}; available "
        f"{_fmt(free)} of {_fmt(total)}; this job requests: {asked}"
    )


def reserved_cpus(cfg: TrainConfig) -> float:
    """Ray CPUs a job's actors and replicas reserve (a private cluster gets at least this many)."""
    return (
        cfg.policy.num_replicas * cfg.policy.cpus_per_replica
        + cfg.verifier.autoscaling.max_replicas * cfg.verifier.cpus_per_replica
        + cfg.trainer.num_workers * cfg.trainer.cpus_per_worker
        + cfg.rollout.num_workers * cfg.rollout.cpus_per_worker
        + cfg.rl_data.read_cpus  # at least one prompt-reading Ray Data task at a time
    )


def resource_requests(cfg: TrainConfig, read_cpus: float) -> dict[str, dict[str, float]]:
    """What each part of a job asks the cluster for, in Ray's resource names (for the wait reports)."""
    c = cfg
    parts = {  # name: (count, CPUs, device, accelerator share) of one
        "policy replica(s)": (c.policy.num_replicas, c.policy.cpus_per_replica, c.policy.device,
                              c.policy.accelerators_per_replica),
        "verifier replica(s) at most": (c.verifier.autoscaling.max_replicas, c.verifier.cpus_per_replica, "cpu",
                                        1.0),
        "trainer rank(s)": (c.trainer.num_workers, c.trainer.cpus_per_worker, c.trainer.device,
                            c.trainer.accelerators_per_worker),
        "rollout worker(s)": (c.rollout.num_workers, c.rollout.cpus_per_worker, "cpu", 1.0),
    }  # fmt: skip
    asked = {}
    for name, (n, cpus, device, share) in parts.items():
        one = ray_options(device if device != "auto" else "cpu", cpus, share)
        res = {"CPU": one["num_cpus"], "GPU": one.get("num_gpus", 0.0), **one.get("resources", {})}
        asked[f"{n} {name}"] = {k: n * v for k, v in res.items() if v}
    return asked | {"prompt reads, per task": {"CPU": read_cpus}}
