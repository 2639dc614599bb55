"""The manifest of a weight push: where each tensor lies in the flat byte buckets (drkernel.model.weights packs
and unpacks them). Plain dataclasses, torch-free, so every receiver can read a manifest without the packer."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TensorSlot:
    """Where one tensor lives in the buckets."""

    name: str
    dtype: str  # torch dtype name without the "torch." prefix, e.g. "bfloat16"
    shape: tuple[int, ...]
    bucket: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class WeightsManifest:
    """Everything a receiver needs besides the bytes; small enough to send with every push."""

    version: int
    slots: tuple[TensorSlot, ...]
    bucket_nbytes: tuple[int, ...]

    @property
    def total_bytes(self) -> int:
        return sum(self.bucket_nbytes)
