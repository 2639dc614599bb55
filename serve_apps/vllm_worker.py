"""What the policy replica asks of vLLM's engine process: load pushed weights, report their layout and checksum.

vLLM mixes this class into its GPU (or, with vllm-ascend, NPU) worker through the engine argument
`worker_extension_cls`, so these methods run in the engine's own process, where the model lives, and the
replica reaches them with `AsyncLLM.collective_rpc(name, args=...)`. Only plain values cross that call
(strings, ints, lists): vLLM's RPC decodes its arguments untyped, and nothing here needs more. The weight
bytes travel out of band: the replica copies each pushed bucket into a POSIX shared-memory segment on the
same node, and `drkernel_load_shm` maps it, moves the whole bucket to the device in one copy and hands
views of it to the model's own `load_weights` (which fuses q/k/v and gate/up as vLLM stores them).

A load is a transaction: `drkernel_begin_load`, one `drkernel_load_shm` per bucket, `drkernel_finish_load`,
which refuses to finish unless every parameter of the model was written.
"""

from __future__ import annotations

import _posixshmem
import mmap
import os
from typing import Any

import torch

from drkernel.model.weights import state_checksum, unfuse

SHM_PREFIX = "drkernel-w-"


class _Segment:
    """A read-only view of the replica's segment. Opened by name with shm_open and mmap, not through
    SharedMemory, so this process's resource tracker (shared with the replica under spawn) never adopts or
    unlinks it: the replica owns the segment's life."""

    def __init__(self, name: str) -> None:
        if not name.startswith(SHM_PREFIX) or "/" in name:
            raise ValueError(f"not a weight-push segment: {name!r}")
        fd = _posixshmem.shm_open("/" + name, os.O_RDONLY, mode=0o600)
        try:
            self.buf = mmap.mmap(fd, os.fstat(fd).st_size, access=mmap.ACCESS_COPY)  # private: never written back
        finally:
            os.close(fd)

    def close(self) -> None:
        self.buf.close()


class WeightLoaderExtension:
    """Methods vLLM adds to its worker (`self.model_runner`, `self.device`, `self.vllm_config` are the worker's)."""

    model_runner: Any
    device: torch.device
    vllm_config: Any

    def _model(self) -> torch.nn.Module:
        return self.model_runner.model

    def _trainer_state(self) -> dict[str, torch.Tensor]:
        """The model's parameters named and shaped as the trainer's (HF) state dict: fused projections split,
        a tied lm_head listed under its own name as the HF state dict lists it."""
        model = self._model()
        state: dict[str, torch.Tensor] = {}
        for name, param in model.named_parameters():
            module = model.get_submodule(name.rsplit(".", 1)[0])
            data = param.data
            rows = getattr(module, "org_vocab_size", None)  # vLLM pads vocabulary rows to a multiple of 64
            if rows is not None and data.shape[0] > rows:
                data = data[:rows]
            state.update(unfuse(name, data, getattr(module, "output_sizes", None)))
        hf_config = self.vllm_config.model_config.hf_config
        if getattr(hf_config, "tie_word_embeddings", False) and "lm_head.weight" not in state:
            state["lm_head.weight"] = state["model.embed_tokens.weight"]
        return state

    def drkernel_layout(self) -> list[list[Any]]:
        """[[name, dtype, shape], ...] of the trainer-layout state: what a push must contain, exactly."""
        return [[name, str(t.dtype).removeprefix("torch."), list(t.shape)] for name, t in self._trainer_state().items()]

    def drkernel_begin_load(self) -> None:
        self._drkernel_loaded: set[str] = set()

    def drkernel_load_shm(self, shm_name: str, nbytes: int, slots: list[list[Any]]) -> int:
        """Load one bucket: `slots` = [[name, dtype, shape, offset, nbytes], ...]; returns tensors loaded."""
        shm = _Segment(shm_name)
        try:
            raw = torch.frombuffer(shm.buf, dtype=torch.uint8, count=nbytes)
            bucket = raw.to(self.device)  # one host-to-device copy per bucket
            del raw
            weights = []
            for name, dtype, shape, offset, size in slots:
                piece = bucket[offset : offset + size]
                dt = getattr(torch, dtype)
                if offset % dt.itemsize:
                    piece = piece.clone()  # a view at an unaligned offset cannot change dtype
                weights.append((name, piece.view(dt).view(shape)))
            loaded = self._model().load_weights(weights)
            torch.accelerator.synchronize()
            self._drkernel_loaded |= set(loaded)
            return len(weights)
        finally:
            shm.close()

    def drkernel_finish_load(self) -> int:
        """Run vLLM's post-load step; refuse (raise) when the push left any parameter unwritten."""
        from vllm.model_executor.model_loader.utils import process_weights_after_loading

        model = self._model()
        missing = sorted({n for n, _ in model.named_parameters()} - self._drkernel_loaded)
        if missing:
            raise ValueError(f"weight push left {len(missing)} parameters unwritten, e.g. {missing[:3]}")
        process_weights_after_loading(model, self.vllm_config.model_config, self.device)
        return len(self._drkernel_loaded)

    def drkernel_checksum(self) -> str:
        """drkernel.model.weights.state_checksum of the trainer-layout state: equal to the trainer's after a push."""
        return state_checksum(self._trainer_state())
