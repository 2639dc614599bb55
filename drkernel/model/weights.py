"""A state dict as flat uint8 buckets plus a manifest: the wire format of every weight push.

The trainer packs parameters into a few large byte buffers (at most `bucket_bytes` each, one tensor never
split; a tensor larger than a bucket gets a bucket of its own) and puts each bucket in the object store once;
every policy replica copies the bytes back into its own parameters in place. Staging buffers are reused
across publishes (fresh buffers cost page faults that dominate a push, see research/verl_async_reuse.md §5)
and are pinned on an accelerator host so device-to-host copies can be asynchronous. Bytes, not pickled
tensors, so bf16 travels as it is and `ray.get` on the replica is zero-copy.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from drkernel.types.weights import TensorSlot, WeightsManifest

DEFAULT_BUCKET_BYTES = 512 << 20


def _layout(state_dict: Mapping[str, torch.Tensor], bucket_bytes: int) -> tuple[list[TensorSlot], list[int]]:
    slots: list[TensorSlot] = []
    sizes: list[int] = []
    for name, tensor in state_dict.items():
        nbytes = tensor.numel() * tensor.element_size()
        if not sizes or (sizes[-1] + nbytes > bucket_bytes and sizes[-1] > 0):
            sizes.append(0)
        dtype = str(tensor.dtype).removeprefix("torch.")
        slots.append(TensorSlot(name, dtype, tuple(tensor.shape), len(sizes) - 1, sizes[-1], nbytes))
        sizes[-1] += nbytes
    return slots, sizes


class BucketPacker:
    """Packs state dicts of one fixed layout into reused staging buffers."""

    def __init__(self, bucket_bytes: int = DEFAULT_BUCKET_BYTES, pin_memory: bool | None = None) -> None:
        if bucket_bytes < 1:
            raise ValueError(f"bucket_bytes must be >= 1, got {bucket_bytes}")
        self.bucket_bytes = bucket_bytes
        self.pin_memory = torch.cuda.is_available() if pin_memory is None else pin_memory
        self._staging: list[torch.Tensor] = []

    def _buffers(self, sizes: list[int]) -> list[torch.Tensor]:
        if [b.numel() for b in self._staging] != sizes:
            self._staging = [torch.empty(n, dtype=torch.uint8, pin_memory=self.pin_memory) for n in sizes]
        return self._staging

    def pack(self, state_dict: Mapping[str, torch.Tensor], version: int) -> tuple[list[np.ndarray], WeightsManifest]:
        """Copy every tensor into the staging buffers; return numpy views of them and the manifest.

        The views alias the staging buffers: put them in the object store (which copies) before the next pack.
        """
        slots, sizes = _layout(state_dict, self.bucket_bytes)
        buffers = self._buffers(sizes)
        with torch.no_grad():
            for slot, tensor in zip(slots, state_dict.values()):
                src = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
                buffers[slot.bucket][slot.offset : slot.offset + slot.nbytes].copy_(src, non_blocking=True)
        if any(t.is_cuda for t in state_dict.values()):
            torch.cuda.synchronize()
        manifest = WeightsManifest(version=version, slots=tuple(slots), bucket_nbytes=tuple(sizes))
        return [b.numpy() for b in buffers], manifest


def unpack_into(
    target: Mapping[str, torch.Tensor], buckets: Sequence[np.ndarray | bytes | memoryview], manifest: WeightsManifest
) -> None:
    """Copy the bytes into the tensors of `target` (e.g. `model.state_dict()`) in place.

    Refuses a push whose layout does not match the receiver (missing or extra names, other shape or dtype),
    so a replica never serves a half-loaded model.
    """
    if len(buckets) != len(manifest.bucket_nbytes):
        raise ValueError(f"{len(buckets)} buckets received, manifest lists {len(manifest.bucket_nbytes)}")
    views = []
    for i, (bucket, nbytes) in enumerate(zip(buckets, manifest.bucket_nbytes)):
        view = memoryview(bucket).cast("B")
        if view.nbytes != nbytes:
            raise ValueError(f"bucket {i} holds {view.nbytes} bytes, manifest says {nbytes}")
        views.append(view)
    names = {s.name for s in manifest.slots}
    if names != set(target):
        missing, extra = sorted(set(target) - names), sorted(names - set(target))
        raise ValueError(f"weight push does not match the model: missing {missing[:5]}, unexpected {extra[:5]}")
    for slot in manifest.slots:
        dst = target[slot.name]
        if tuple(dst.shape) != slot.shape or str(dst.dtype).removeprefix("torch.") != slot.dtype:
            raise ValueError(
                f"{slot.name}: model has {tuple(dst.shape)} {dst.dtype}, push has {slot.shape} {slot.dtype}"
            )
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not writable.*")  # object-store buffers are read-only; we copy
        for slot in manifest.slots:
            raw = torch.frombuffer(views[slot.bucket], dtype=torch.uint8, count=slot.nbytes, offset=slot.offset)
            dst = target[slot.name]
            dst.copy_(raw.view(dst.dtype).view(dst.shape), non_blocking=True)


def state_checksum(state_dict: Mapping[str, torch.Tensor]) -> str:
    """sha256 over every tensor's name, dtype, shape and bytes (sorted by name): equal iff bit-identical.

    Trainer and policy replicas compute it the same way, so a weight push can be checked end to end.
    """
    digest = hashlib.sha256()
    for name in sorted(state_dict):
        tensor = state_dict[name].detach().contiguous().cpu()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


FUSED_PROJECTIONS = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


def unfuse(name: str, tensor: torch.Tensor, output_sizes: Sequence[int] | None) -> list[tuple[str, torch.Tensor]]:
    """One parameter of an inference engine's fused layout as the trainer's (HF) tensors.

    vLLM stores q/k/v as one `qkv_proj` and gate/up as one `gate_up_proj`, stacked along the output
    dimension (dim 0) in that order; `output_sizes` are the row counts of the parts. Other names pass through.
    """
    for fused, parts in FUSED_PROJECTIONS.items():
        if f".{fused}." not in name:
            continue
        if output_sizes is None or len(output_sizes) != len(parts) or sum(output_sizes) != tensor.shape[0]:
            raise ValueError(f"{name}: cannot split {tuple(tensor.shape)} into {parts} by sizes {output_sizes}")
        pieces = torch.split(tensor, list(output_sizes), dim=0)
        return [(name.replace(f".{fused}.", f".{part}."), piece) for part, piece in zip(parts, pieces)]
    return [(name, tensor)]
