"""Counting what eager PyTorch runs: one launch per aten operator that reaches the dispatcher.

A TorchDispatchMode sees each operator below autograd, once (the operators it calls internally run
with the mode off). Views, allocations and metadata operators launch nothing and are skipped. Bytes:
every tensor argument is read once (the sectors of its distinct elements, so a broadcast view counts its
real size and a strided one the whole sectors it touches), every returned tensor written once. Flops:
torch's own formulas for matmul-class operators (torch.utils.flop_counter; for the fused attention operators
it has none for, its attention formula), priced at the precision of the operands; FP32 matmuls are FP32 (eager
PyTorch leaves TF32 off), FP32 convolutions TF32 (cuDNN's default), complex ones count their real arithmetic
(4x the formula's), fp64 ones the FP64 rate.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count

from drkernel.perfmodel.cost import SECTOR_BYTES, LaunchCount

FREE = frozenset(
    {
        "aten::empty.memory_format",
        "aten::empty_strided",
        "aten::empty_like",
        "aten::detach",
        "aten::alias",
        "aten::lift_fresh",
        "aten::new_empty",
        "aten::new_empty_strided",
        "aten::set_.source_Storage_storage_offset",
        "aten::resize_",
        "aten::_local_scalar_dense",
        "aten::_unsafe_view",
        "aten::_reshape_alias",
    }
)


def is_free(func: Any) -> bool:
    """Operators that launch no kernel: views, allocations, metadata."""
    name = str(func._schema.name) + ("." + func._overloadname if func._overloadname != "default" else "")
    return bool(getattr(func, "is_view", False)) or name in FREE or str(func._schema.name) in FREE


def op_name(func: Any) -> str:
    return str(func._schema.name) + ("." + func._overloadname if func._overloadname != "default" else "")


def tensor_bytes(t: torch.Tensor, sector: int = SECTOR_BYTES) -> int:
    """Bytes a kernel moves for this view: the sectors its distinct elements lie in (a broadcast dimension counts
    once). A view that strides over part of each sector (every other int16 of a buffer of floats, a column slice)
    moves the whole sectors (issue 35, as for Triton launches): per row of its innermost dimension the sectors its
    span covers, at most the sectors of its whole extent (rows that touch share them)."""
    if t.numel() == 0:
        return 0
    item = t.element_size()
    dims = sorted((stride, size) for size, stride in zip(t.shape, t.stride()) if stride != 0 and size > 1)
    if not dims:
        return _round_up(item, sector)
    distinct = math.prod(size for _, size in dims)
    extent = _round_up((sum((n - 1) * s for s, n in dims) + 1) * item, sector)
    stride, size = dims[0]
    if stride * item >= sector:  # every element in sectors of its own
        return min(distinct * _round_up(item, sector), extent)
    row = _round_up(((size - 1) * stride + 1) * item, sector)
    return min(distinct // size * row, extent)


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def _precision(func: Any, tensors: list[torch.Tensor]) -> str:
    """The pipe the GPU runs this operator on. cuDNN convolutions on fp32 run in TF32 by default
    (torch.backends.cudnn.conv.fp32_precision == "tf32"), unlike matmuls (red-team finding, issue 27 round 2: an fp32
    convolution reference priced at the plain FP32 rate let a TF32 Triton convolution model a 1.8x speedup that cuDNN's
    own TF32 convolution does not leave)."""
    dtypes = {t.dtype for t in tensors}
    if dtypes & {torch.float64, torch.complex128}:
        return "fp64"
    if dtypes & {torch.float16, torch.bfloat16}:
        return "bf16"
    return "tf32" if "conv" in op_name(func) and torch.float32 in dtypes else "fp32"


def _real_flops(tensors: list[torch.Tensor]) -> float:
    """Real flops per flop the formula counts: torch's formulas count a multiply-add as 2 whatever the dtype, and a
    complex one is 4 real multiplies and 4 adds (red-team finding: a matmul done as a complex mm of half the size
    was priced at half the reference's arithmetic for twice its work)."""
    return 4.0 if any(t.is_complex() for t in tensors) else 1.0


def _attention(q: Any, k: Any, v: Any, *_: Any, **__: Any) -> int:
    return sdpa_flop_count(q.shape, k.shape, v.shape)


def _attention_backward(grad: Any, q: Any, k: Any, v: Any, *_: Any, **__: Any) -> int:
    return sdpa_backward_flop_count(grad.shape, q.shape, k.shape, v.shape)


def _lstm_layer(x: Any, w_ih: Any, w_hh: Any, *_: Any, **__: Any) -> int:
    """One direction of one layer of oneDNN's LSTM: per step and batch row, the gates' two matmuls."""
    rows = x.numel() // max(x.shape[-1], 1)
    return 2 * rows * (w_ih.numel() + w_hh.numel())


def _pairs(x1: Any, x2: Any) -> int:
    """Pair terms of a batched distance (x1 [..., P, M], x2 [..., R, M]): the batch is the broadcast of both (red-team
    finding F9: a batch taken from x1 alone priced a batch broadcast from x2 at 1/B)."""
    batch = math.prod(torch.broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2])))
    return batch * x1.shape[-2] * x2.shape[-2] * x1.shape[-1]


def _euclidean_dist(x1: Any, x2: Any, *_: Any, **__: Any) -> int:
    """cdist's matmul-based p=2 kernel: a multiply-add per pair term."""
    return 2 * _pairs(x1, x2)


def _cdist_forward(x1: Any, x2: Any, *_: Any, **__: Any) -> int:
    """cdist's direct kernel: a difference, a power and a sum per pair term."""
    return 3 * _pairs(x1, x2)


def _trilinear(i1: Any, i2: Any, i3: Any, e1: Any, e2: Any, e3: Any, *_: Any, **__: Any) -> int:
    """nn.Bilinear's kernel: a multiply-add over the product of the three operands' (unsqueezed) extents."""
    shapes = []
    for t, expand in ((i1, e1), (i2, e2), (i3, e3)):
        shape = list(t.shape)
        for d in sorted(expand):
            shape.insert(d, 1)
        shapes.append(shape)
    return 2 * math.prod(max(sizes) for sizes in zip(*shapes))


# Flop formulas torch.utils.flop_counter lacks: the fused attention kernels eager PyTorch runs on CPU (and the
# device-neutral fused entry points), counted like the CUDA flash / efficient attention kernels it registers
# (issue 35: every CPU attention reference was priced by its bytes alone); oneDNN's LSTM layer, cdist's kernels
# and nn.Bilinear's _trilinear (red-team note N3: references through them were priced by their bytes alone).
EXTRA_FLOPS: dict[str, Any] = {
    "mkldnn_rnn_layer": _lstm_layer,
    "_euclidean_dist": _euclidean_dist,
    "_cdist_forward": _cdist_forward,
    "_trilinear": _trilinear,
    "_scaled_dot_product_flash_attention_for_cpu": _attention,
    "_scaled_dot_product_fused_attention_overrideable": _attention,
    "_scaled_dot_product_attention_math_for_mps": _attention,
    "_scaled_dot_product_flash_attention_for_cpu_backward": _attention_backward,
    "_scaled_dot_product_fused_attention_overrideable_backward": _attention_backward,
}


def flop_formula(func: Any) -> Any:
    """The flop formula of an aten operator (called with its args, kwargs and out_val), or None."""
    formula = flop_registry.get(func._overloadpacket)
    if formula is not None:
        return formula
    extra = EXTRA_FLOPS.get(str(func._schema.name).removeprefix("aten::"))
    return None if extra is None else lambda *args, out_val=None, **kwargs: extra(*args, **kwargs)


def count_op(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any, sector: int = SECTOR_BYTES
) -> LaunchCount:
    ins = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)]
    outs = [x for x in tree_flatten(out)[0] if isinstance(x, torch.Tensor)]
    seen: set[tuple[int, int, tuple[int, ...], tuple[int, ...]]] = set()
    read = 0
    for t in ins:  # the same view passed twice (x * x) is read once; id() also works for fake tensors
        key = (id(t), t.storage_offset(), tuple(t.shape), tuple(t.stride()))
        if key not in seen:
            seen.add(key)
            read += tensor_bytes(t, sector)
    written = sum(tensor_bytes(t, sector) for t in outs)
    flops: dict[str, float] = {}
    formula = flop_formula(func)
    if formula is not None:
        flops[_precision(func, ins)] = float(formula(*args, **kwargs, out_val=out)) * _real_flops(ins)
    return LaunchCount(op_name(func), "aten", read, written, 0, flops)


class AtenCounter(TorchDispatchMode):
    """Counts every launching aten operator run while active (`launches`)."""

    def __init__(self, sector_bytes: int = SECTOR_BYTES) -> None:
        super().__init__()
        self.sector_bytes = sector_bytes
        self.launches: list[LaunchCount] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not is_free(func):
            self.launches.append(count_op(func, args, kwargs, out, self.sector_bytes))
        return out
