"""How a trainer rank holds the policy: FSDP2 over the ranks' mesh, with the anchors' mixed precision.

Master weights, gradients and AdamW states stay in `trainer.dtype` (fp32 for the 8B recipe: a 1e-6 step is
below bfloat16's resolution); with `trainer.compute_dtype` set, FSDP2's MixedPrecisionPolicy gathers the
parameters in that dtype for forward and backward, so activations are in it too, and reduces gradients in
fp32. `trainer.offload_optimizer` adds CPUOffloadPolicy: the sharded state lives on the host and the
optimizer steps there. Both policies need FSDP2, so a one-rank trainer that asks for either runs FSDP2 over a
one-rank mesh (drkernel.train.backend).
"""

from __future__ import annotations

import torch
from torch import nn

from drkernel.config.train import TrainerConfig


def compute_dtype(tc: TrainerConfig) -> torch.dtype:
    """The dtype forward and backward run in."""
    return getattr(torch, tc.compute_dtype or tc.dtype)


def shard_policy(
    scorer: nn.Module, decoder_layers: list[nn.Module], tc: TrainerConfig, device: str, world: int
) -> None:
    """fully_shard each decoder layer, then the scorer (the root: embeddings, final norm, LM head)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    kwargs: dict = {"mesh": init_device_mesh(device, (world,))}
    if tc.mixed_precision:
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=compute_dtype(tc), reduce_dtype=torch.float32)
    if tc.offload_optimizer:
        kwargs["offload_policy"] = CPUOffloadPolicy()
    for layer in decoder_layers:
        fully_shard(layer, **kwargs)
    fully_shard(scorer, **kwargs)
