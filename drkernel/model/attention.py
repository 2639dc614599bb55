"""Attention that never materialises S x S on an accelerator.

transformers' SDPA path picks among PyTorch's kernels; with grouped-query attention in fp32, or a shape no fused
kernel takes, PyTorch falls back to its math kernel, which holds a [heads, S, S] score matrix: 40.5 GiB in fp32
at the 8B recipe's 18,432-token context, an out-of-memory error an hour into a job. On CUDA with a 16-bit
compute dtype the fused kernels (flash, memory-efficient, cuDNN) take every shape the trainer sends, so there
the math fallback is refused: a clear error instead of the S x S tensor. fp32 (and CPU) keep every kernel; the
memory estimate counts the math kernel's score matrix for fp32 compute on an accelerator.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


def fused_only(device_type: str, dtype: torch.dtype) -> bool:
    """Whether attention on `device_type` in `dtype` is held to the fused kernels."""
    return device_type == "cuda" and dtype in (torch.bfloat16, torch.float16)


@contextlib.contextmanager
def fused_attention(enabled: bool) -> Iterator[None]:
    """Within the block, SDPA may use only flash, memory-efficient or cuDNN attention when `enabled`."""
    if not enabled:
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]):
        yield
