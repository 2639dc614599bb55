"""Which device and torch.distributed backend the trainer ranks use: one pure, tested decision.

    cpu,  1 rank  -> one process, no process group
    cpu,  n ranks -> gloo, FSDP2 over a CPU device mesh
    cuda, n ranks -> nccl, FSDP2 (1 rank: plain single device)
    npu,  n ranks -> hccl, FSDP2 (written against torch_npu's public API; not run on Ascend here)
    1 rank with mixed precision or offload -> FSDP2 over a one-rank mesh (its policies need FSDP2)

The device itself comes from drkernel.devices.resolve_device (the project's one device chooser); verl's
platform probe reports cuda/nccl even on a CPU-only host, so it is never asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from drkernel.devices import resolve_device

DIST_BACKEND = {"cpu": "gloo", "cuda": "nccl", "npu": "hccl"}


@dataclass(frozen=True)
class TrainBackend:
    """The resolved placement of every trainer rank."""

    device: str  # cpu | cuda | npu
    dist_backend: str | None  # None: a single process without a process group
    fsdp: bool  # shard parameters with FSDP2 (fully_shard)
    world_size: int


def choose_backend(
    requested: str, world_size: int, available: Mapping[str, bool], fsdp_policies: bool = False
) -> TrainBackend:
    """The backend for `world_size` ranks on `requested` (auto|cpu|cuda|npu) given what this host has;
    `fsdp_policies`: the trainer asks for FSDP2 mixed precision or offload (drkernel.train.sharding)."""
    if world_size < 1:
        raise ValueError(f"trainer world size must be >= 1, got {world_size}")
    device = resolve_device(requested, available)
    if world_size == 1 and not fsdp_policies:
        return TrainBackend(device, None, False, 1)
    return TrainBackend(device, DIST_BACKEND[device], True, world_size)
