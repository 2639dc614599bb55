"""Ray start-up for every driver (the training job, `drkernel eval`, `drkernel serve`): join the cluster a user
names, or start a private one that never attaches to a stranger's cluster ("auto" would)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import ray

REPO = Path(__file__).resolve().parents[2]


def worker_pythonpath() -> str:
    """The checkout first, then whatever the driver was started with (a carried site with Ray, say): replacing
    the driver's PYTHONPATH would leave workers unable to import Ray itself."""
    return os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)


def private_cpus(reserved: float) -> int:
    """CPUs of a private cluster: the machine's, or more when the caller's actors reserve more, so that every
    one of them can be scheduled on a small machine (issue 36)."""
    return max(os.cpu_count() or 1, math.ceil(reserved))


def start_ray(
    address: str | None,
    *,
    num_cpus: float | None = None,
    log_to_driver: bool = True,
    join_logging_level: int | None = None,
    checkout_on_path: bool = True,
) -> bool:
    """Join the cluster at `address`, or (None or "local") start a private one; True when this call started Ray.

    A process already connected keeps its Ray (False). `num_cpus` sizes a private cluster (None: Ray's count);
    `checkout_on_path` gives its workers this checkout on PYTHONPATH; `join_logging_level` is Ray's logging
    level when joining. Joining raises Ray's ConnectionError/ValueError for a cluster that does not answer.
    """
    if ray.is_initialized():
        return False
    if address not in (None, "local"):
        extra = {} if join_logging_level is None else {"logging_level": join_logging_level}
        ray.init(address=address, log_to_driver=log_to_driver, **extra)
        return False
    env = {"runtime_env": {"env_vars": {"PYTHONPATH": worker_pythonpath()}}} if checkout_on_path else {}
    ray.init(address="local", num_cpus=num_cpus, log_to_driver=log_to_driver, **env)
    return True
