"""The judge's comparisons: outputs against the reference's (elementwise and at the output's scale), and
inputs against their pristine values (input mutation). Runs only in the trusted judge."""

from __future__ import annotations

import math
from typing import Any

import torch

EXACT_MISMATCH = "integers and booleans compare exactly"  # in the message of an integer or bool mismatch
CHUNK = 1 << 24  # elements per step of the comparison: bounded temporaries for multi-gigabyte outputs


def _tensor_stats(r: torch.Tensor, c: torch.Tensor, atol: float, rtol: float) -> tuple[bool, float, float, float]:
    """(elementwise allclose, max |c - r| over finite differences, ||c - r||_2, ||r||_2), in chunks, with
    the partial results kept on the device and one host sync at the end. The norms are over positions
    where both are finite (NaN/Inf placement is checked separately)."""
    rf, cf = r.reshape(-1), c.reshape(-1)
    zero = torch.zeros((), dtype=torch.float64, device=rf.device)
    not_close, worst, err2, ref2 = zero.clone(), zero.clone(), zero.clone(), zero.clone()
    for start in range(0, rf.numel(), CHUNK):
        rc, cc = rf[start : start + CHUNK], cf[start : start + CHUNK]
        not_close += (~torch.isclose(cc, rc, atol=atol, rtol=rtol, equal_nan=True)).sum()
        wide = torch.complex128 if rc.is_complex() else torch.float64  # .double() drops the imaginary part
        rd, cd = rc.to(wide), cc.to(wide)
        both = torch.isfinite(rd) & torch.isfinite(cd)
        diff = torch.where(both, cd - rd, zero)
        rr = torch.where(both, rd, zero)
        worst = torch.maximum(worst, diff.abs().max().double())
        err2 += (diff.abs() ** 2).sum() if diff.is_complex() else (diff * diff).sum()
        ref2 += (rr.abs() ** 2).sum() if rr.is_complex() else (rr * rr).sum()
    bad, worst_f, err2_f, ref2_f = torch.stack([not_close, worst, err2, ref2]).tolist()
    return bad == 0, worst_f, math.sqrt(err2_f), math.sqrt(ref2_f)


def _all_stats(
    r: torch.Tensor, c: torch.Tensor, atol: float, rtol: float
) -> tuple[int, int, bool, float, float, float]:
    """(NaN mismatches, Inf mismatches, then _tensor_stats' four): in one device pass for large floating
    CUDA tensors (drkernel.verify.judging.compare_kernel), else with torch ops."""
    if r.device.type == "cuda":
        from drkernel.verify.judging import compare_kernel

        if compare_kernel.eligible(r, c):
            return compare_kernel.stats(r, c, atol, rtol)
    nan_bad = inf_bad = 0
    if r.is_floating_point() or r.is_complex():
        nan_bad = int((torch.isnan(c) & ~torch.isnan(r)).sum())
        inf_bad = int((torch.isinf(c) & ~torch.isinf(r)).sum())
    if nan_bad or inf_bad:
        return nan_bad, inf_bad, False, math.nan, math.nan, math.nan
    return 0, 0, *_tensor_stats(r, c, atol, rtol)


def compare(
    reference: list[Any],
    candidate: list[Any],
    atol: float,
    rtol: float,
    mode: str = "strict",
    inputs: list[Any] | None = None,
) -> tuple[bool, str, dict[str, Any]]:
    """Same structure, shape, dtype; no NaN/Inf where the reference is finite; then per tensor:
    - integer and bool tensors: equal exactly (an index off by one is wrong whatever its size; issue 35), except
      an index tensor whose entries select, from one of the call's `inputs`, values equal to those the
      reference's select within the tolerance (argmax / top-k over near-ties: index_selection);
    - elementwise: KernelBench's allclose(atol, rtol);
    - scale ("strict" mode only): relative L2 error ||c - r|| / ||r|| <= rtol. An absolute tolerance
      larger than every output value (a 16384-wide softmax is about 6e-5 per element) lets a kernel
      that writes x*1e-6 pass elementwise; its relative L2 error is about 1. A reference that is
      exactly zero asks the candidate for max |c| <= atol instead.
    Both results are in the returned stats (`elementwise`, `scale`)."""
    stats: dict[str, Any] = {"max_abs_diff": 0.0, "rel_l2": 0.0, "elementwise": True, "scale": True}
    if len(reference) != len(candidate):
        return False, f"output count {len(candidate)} != reference {len(reference)}", stats
    for i, (r, c) in enumerate(zip(reference, candidate)):
        where = f"output[{i}]" if len(reference) > 1 else "output"
        if isinstance(r, torch.Tensor):
            if not isinstance(c, torch.Tensor):
                return False, f"{where} is {type(c).__name__}, reference is a tensor", stats
            if tuple(c.shape) != tuple(r.shape):
                return False, f"{where} shape {tuple(c.shape)} != reference {tuple(r.shape)}", stats
            if c.dtype != r.dtype:
                return False, f"{where} dtype {c.dtype} != reference {r.dtype}", stats
            c = c.to(r.device)
            if not r.numel():
                continue
            if not (r.is_floating_point() or r.is_complex()):
                if torch.equal(c, r):
                    continue
                ties = index_selection(r, c, inputs or [], atol, rtol)
                if ties is not None:
                    stats["index_ties"] = stats.get("index_ties", 0) + ties
                    continue
                worst = (c.long() - r.long()).abs().max().item() if r.dtype != torch.bool else 1
                why = f"{where} values differ (max abs diff {worst}; {EXACT_MISMATCH})"
                return False, why, stats
            nan_bad, inf_bad, close, worst, err, norm = _all_stats(r, c, atol, rtol)
            if nan_bad:
                return False, f"{where} has NaN where the reference is a number", stats
            if inf_bad:
                return False, f"{where} has Inf where the reference is finite", stats
            stats["max_abs_diff"] = max(stats["max_abs_diff"], worst)
            rel = err / norm if norm > 0 else (0.0 if worst <= atol else math.inf)
            stats["rel_l2"] = max(stats["rel_l2"], rel)
            if not close:
                stats["elementwise"] = False
                return False, f"{where} values differ (max abs diff {worst:.3g}, atol={atol:g}, rtol={rtol:g})", stats
            if mode == "strict" and not rel <= rtol:
                stats["scale"] = False
                return (
                    False,
                    (
                        f"{where} relative L2 error {rel:.3g} > {rtol:g} (within atol elementwise, "
                        f"but wrong at the output's own scale)"
                    ),
                    stats,
                )
        else:
            if isinstance(r, float) and isinstance(c, (int, float)) and not isinstance(c, bool):
                if not math.isclose(c, r, rel_tol=rtol, abs_tol=atol if mode == "kernelbench" else 0.0) and not (
                    mode == "strict" and r == 0 and abs(c) <= atol
                ):
                    return False, f"{where} = {c!r}, reference {r!r}", stats
            elif c != r or type(c) is not type(r):
                return False, f"{where} = {c!r}, reference {r!r}", stats
    return True, "", stats


def index_selection(r: torch.Tensor, c: torch.Tensor, inputs: list[Any], atol: float, rtol: float) -> int | None:
    """When integer outputs differ: the number of differing entries if `c` is as good an index as `r` into one of
    the floating `inputs` along one dimension (argmax / argmin with that dimension dropped or kept, top-k / sort
    indices with k entries along it, a flat argmax as a 0-d tensor): every index in range, the k indices of a slice
    distinct, and the values they select equal to those `r` selects within (atol, rtol). None otherwise."""
    if r.dtype == torch.bool:
        return None
    rl, cl = r.long(), c.long()
    for x in inputs:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or not x.numel():
            continue
        x = x.to(r.device)
        ways: list[tuple[torch.Tensor, int, torch.Tensor, torch.Tensor]] = []
        if r.dim() == 0:
            ways.append((x.reshape(-1), 0, rl.reshape(1), cl.reshape(1)))
        for d in range(x.dim()):
            dropped = list(x.shape[:d]) + list(x.shape[d + 1 :])
            if list(r.shape) == dropped:
                ways.append((x, d, rl.unsqueeze(d), cl.unsqueeze(d)))
            elif (
                r.dim() == x.dim()
                and all(a == b for i, (a, b) in enumerate(zip(r.shape, x.shape)) if i != d)
                and r.shape[d] <= x.shape[d]
            ):
                ways.append((x, d, rl, cl))
        for src, d, ri, ci in ways:
            n = src.shape[d]
            if bool(((ci < 0) | (ci >= n)).any()) or bool(((ri < 0) | (ri >= n)).any()):
                continue
            if ci.shape[d] > 1:
                s = ci.sort(dim=d).values
                if bool((s.narrow(d, 1, s.shape[d] - 1) == s.narrow(d, 0, s.shape[d] - 1)).any()):
                    continue
            want, got = src.gather(d, ri), src.gather(d, ci)
            if bool(torch.isclose(got, want, atol=atol, rtol=rtol, equal_nan=True).all()):
                return int((r != c).sum())
    return None


BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}  # an integer type of each element size


def identical(a: list[Any], b: list[Any]) -> bool:
    """Bit-for-bit equality of two value lists, for the input-mutation check: tensors are compared as integers
    of their element size (one pass; a NaN equals the same NaN, and -0.0 written over 0.0 is a change)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            # A conjugate or negative view (a reference's get_inputs may return one) has no bits of its own to view.
            x, y = x.resolve_conj().resolve_neg(), y.to(x.device).resolve_conj().resolve_neg()
            bits = BITS.get(x.element_size())
            if bits is not None and x.dtype != torch.bool:
                x, y = x.view(bits), y.view(bits)
            if not torch.equal(x, y):
                return False
        elif x != y:
            return False
    return True
