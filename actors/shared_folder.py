"""Checks, before a job starts anything, that its run folder is one folder on every node of the cluster.

The driver writes a token file; a zero-CPU task pinned to each alive node reads it back and writes its own
file beside it. A node that cannot (a node-local disk, a missing mount, no write permission) is named in
one error, before any minute of training is spent.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


class FolderNotShared(RuntimeError):
    """The run folder is not the same writable folder on every node."""


@ray.remote(num_cpus=0, max_retries=0)
def _probe(folder: str, token: str) -> str | None:
    """None when this node reads the driver's token and can write beside it; else what went wrong."""
    path = Path(folder)
    try:
        if (path / f".shared-{token}").read_text() != token:
            return "sees a different file under that path"
        (path / f".shared-{token}-{ray.get_runtime_context().get_node_id()[:12]}").write_text(token)
    except OSError as e:
        return f"{type(e).__name__}: {e.strerror or e}"
    return None


def check_shared(folder: Path, timeout_s: float = 120.0) -> int:
    """Raise FolderNotShared naming each node that cannot read and write `folder`; returns the node count."""
    token = secrets.token_hex(8)
    marker = folder / f".shared-{token}"
    marker.write_text(token)
    nodes = [n for n in ray.nodes() if n["Alive"]]
    try:
        probes = [
            _probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(
                str(folder), token
            )
            for n in nodes
        ]
        problems = {n["NodeManagerAddress"]: p for n, p in zip(nodes, ray.get(probes, timeout=timeout_s)) if p}
    finally:
        for f in folder.glob(f".shared-{token}*"):
            f.unlink(missing_ok=True)
    if problems:
        detail = "; ".join(f"node {ip}: {why}" for ip, why in sorted(problems.items()))
        raise FolderNotShared(
            f"run folder {folder} is not shared by every node of the cluster ({detail}). Checkpoints, the prompt "
            "pool and the SFT checkpoint are written on one node and read on another: pass --output-dir on "
            "storage every node mounts at the same path (NFS, a shared volume)"
        )
    return len(nodes)
