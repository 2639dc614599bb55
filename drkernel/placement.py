"""Where a role runs on the cluster: one device kind plus a share of one device, as Ray resource requests.

Every actor, task and Serve replica of the job asks for its resources through `ray_options`, so a device kind
means the same Ray resource everywhere (cuda -> GPU, npu -> the custom NPU resource Ascend nodes advertise).
"auto" is decided by `resolve_kind` from what the Ray cluster offers (`ray.cluster_resources()`, passed in),
never from the driver's own torch: the driver often runs on a head node without accelerators.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RAY_RESOURCE = {"cuda": "GPU", "npu": "NPU"}
KINDS = ("cpu", "cuda", "npu")


class PlacementError(ValueError):
    """A device the cluster does not offer, or a kind nobody knows."""


def resolve_kind(requested: str, cluster_resources: Mapping[str, float], role: str = "device") -> str:
    """`auto` -> cuda when the cluster has a GPU, else npu when it has an NPU, else cpu; an explicit kind must
    be offered by some node of the cluster (cpu always is)."""
    if requested == "auto":
        for kind in ("cuda", "npu"):
            if cluster_resources.get(RAY_RESOURCE[kind], 0) > 0:
                return kind
        return "cpu"
    if requested not in KINDS:
        raise PlacementError(f"{role}={requested!r}: choose auto, cpu, cuda or npu")
    if requested != "cpu" and cluster_resources.get(RAY_RESOURCE[requested], 0) <= 0:
        raise PlacementError(
            f"{role}={requested!r}, but no node of the Ray cluster offers a {RAY_RESOURCE[requested]} resource "
            f"(cluster resources: {sorted(k for k in cluster_resources if not k.startswith('node:'))})"
        )
    return requested


def ray_options(kind: str, cpus: float, share: float = 1.0) -> dict[str, Any]:
    """Ray options of one actor, task or replica on `kind` (never "auto"): its CPUs plus `share` of one
    accelerator (1 = a whole device; less lets several roles share one device)."""
    if kind not in KINDS:
        raise PlacementError(f"ray_options needs a resolved device kind (cpu, cuda or npu), got {kind!r}")
    if not 0 < share <= 1:
        raise PlacementError(f"an accelerator share must be in (0, 1], got {share}")
    options: dict[str, Any] = {"num_cpus": cpus}
    if kind == "cuda":
        options["num_gpus"] = share
    elif kind == "npu":
        options["resources"] = {"NPU": share}
    return options
