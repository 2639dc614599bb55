"""What the judge checks of a round's outputs beside tensors.compare: their specs (kind, dtype, shape) against the
reference's, whether new input sets or bound output buffers fit the storage a runner holds, and the batched
comparison of a whole round (a fast path that defers every doubtful call to tensors.compare)."""

from __future__ import annotations

import math
from typing import Any

import torch

from drkernel.verify.judging import tensors


def specs(values: list[Any]) -> list[dict[str, Any]]:
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(
                {
                    "kind": "tensor",
                    "dtype": str(v.dtype).removeprefix("torch."),
                    "shape": list(v.shape),
                    "nbytes": v.numel() * v.element_size(),
                }
            )
        else:
            out.append({"kind": "scalar"})
    return out


def spec_mismatch(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> str | None:
    if len(got) != len(want):
        return f"output count {len(got)} != reference {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        where = f"output[{i}]" if len(want) > 1 else "output"
        if g["kind"] != w["kind"]:
            return f"{where} is a {g['kind']}, reference is a {w['kind']}"
        if w["kind"] == "tensor":
            if g["shape"] != w["shape"]:
                return f"{where} shape {tuple(g['shape'])} != reference {tuple(w['shape'])}"
            if g["dtype"] != w["dtype"]:
                return f"{where} dtype {g['dtype']} != reference {w['dtype']}"
    return None


def fits(held: list[list[Any]], sets: list[list[Any]]) -> bool:
    """Whether new input sets can be copied into the ones a runner holds: as many or fewer sets, the same
    tensor shapes, dtypes and strides, and equal non-tensor values."""
    if not held or len(held) < len(sets):
        return False
    for old, new in zip(held, sets):
        if len(old) != len(new):
            return False
        for a, b in zip(old, new):
            if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
                return False
            if isinstance(a, torch.Tensor):
                if a.shape != b.shape or a.dtype != b.dtype or a.stride() != b.stride() or a.device != b.device:
                    return False
            elif type(a) is not type(b) or a != b:
                return False
    return True


def bound_fits(bufs: list[Any], specs: list[dict[str, Any]]) -> bool:
    """Whether one call's bound output buffers match the outputs a runner reported."""
    if len(bufs) != len(specs):
        return False
    for b, s in zip(bufs, specs):
        if (s["kind"] == "tensor") != isinstance(b, torch.Tensor):
            return False
        if isinstance(b, torch.Tensor) and (
            list(b.shape) != s["shape"] or str(b.dtype).removeprefix("torch.") != s["dtype"]
        ):
            return False
    return True


def batch_passes(
    ref_out: list[list[Any]], cand_out: list[list[Any]], atol: float, rtol: float, strict: bool
) -> list[dict[str, Any] | None] | None:
    """The comparison of a whole round at once, with one device-to-host copy instead of several syncs per
    call (a timed round holds up to 64 calls, under the device lock). Per call: its stats when it clearly
    passes, else None, and tensors.compare decides that call (it alone writes failure messages; a
    borderline relative error goes to it too, so the two can never disagree on a verdict). None for the
    whole round when its outputs are not all same-shaped small floating tensors (tensors.compare then)."""
    k = len(ref_out)
    if not k or len(cand_out) != k:
        return None
    width = len(ref_out[0])
    parts = []
    for i in range(width):
        rs = [r[i] if len(r) == width else None for r in ref_out]
        cs = [c[i] if len(c) == width else None for c in cand_out]
        first = rs[0]
        if (
            not isinstance(first, torch.Tensor)
            or not first.is_floating_point()
            or not first.numel()
            or k * first.numel() > tensors.CHUNK
        ):
            return None
        for t in rs + cs:
            if not isinstance(t, torch.Tensor) or t.shape != first.shape or t.dtype != first.dtype:
                return None
        r = torch.stack([t.reshape(-1) for t in rs])
        c = torch.stack([t.to(r.device).reshape(-1) for t in cs])
        bad = ((torch.isnan(c) & ~torch.isnan(r)) | (torch.isinf(c) & ~torch.isinf(r))).any(1)
        close = torch.isclose(c, r, atol=atol, rtol=rtol, equal_nan=True).all(1)
        rd, cd = r.double(), c.double()
        both = torch.isfinite(rd) & torch.isfinite(cd)
        zero = torch.zeros((), dtype=torch.float64, device=rd.device)
        diff = torch.where(both, cd - rd, zero)
        rr = torch.where(both, rd, zero)
        parts.append(
            torch.stack([bad.double(), close.double(), diff.abs().amax(1), (diff * diff).sum(1), (rr * rr).sum(1)], 1)
        )
    table = torch.stack(parts, 1).tolist()  # [call][output][bad, close, worst, err2, ref2]: the one sync
    out: list[dict[str, Any] | None] = []
    for rows in table:
        stats: dict[str, Any] | None = {"max_abs_diff": 0.0, "rel_l2": 0.0, "elementwise": True, "scale": True}
        for bad_, close_, worst, err2, ref2 in rows:
            norm = math.sqrt(ref2)
            rel = math.sqrt(err2) / norm if norm > 0 else (0.0 if worst <= atol else math.inf)
            if bad_ or not close_ or (strict and not rel <= rtol * (1 - 1e-9)) or not math.isfinite(rel):
                stats = None
                break
            stats["max_abs_diff"] = max(stats["max_abs_diff"], worst)
            stats["rel_l2"] = max(stats["rel_l2"], rel)
        out.append(stats)
    return out
