"""The judge's comparisons: outputs against the reference's (elementwise and at the output's scale), and
inputs against their pristine values (input mutation). Runs only in the trusted judge."""

from __future__ import annotations

import math
from typing import Any

import torch

CHUNK = 1 << 24  # elements per step of the comparison: bounded temporaries for multi-gigabyte outputs


def _tensor_stats(r: torch.Tensor, c: torch.Tensor, atol: float, rtol: float) -> tuple[bool, float, float, float]:
    """(elementwise allclose, max |c - r| over finite differences, ||c - r||_2, ||r||_2), in chunks.
    The norms are over positions where both are finite (NaN/Inf placement is checked separately)."""
    close, worst, err2, ref2 = True, 0.0, 0.0, 0.0
    rf, cf = r.reshape(-1), c.reshape(-1)
    for start in range(0, rf.numel(), CHUNK):
        rc, cc = rf[start:start + CHUNK], cf[start:start + CHUNK]
        if close and not bool(torch.isclose(cc, rc, atol=atol, rtol=rtol, equal_nan=True).all()):
            close = False
        wide = torch.complex128 if rc.is_complex() else torch.float64  # .double() drops the imaginary part
        rd, cd = rc.to(wide), cc.to(wide)
        both = torch.isfinite(rd) & torch.isfinite(cd)
        diff = torch.where(both, cd - rd, torch.zeros((), dtype=torch.float64, device=rd.device))
        if diff.numel():
            worst = max(worst, float(diff.abs().max()))
        err2 += float((diff * diff).sum()) if not diff.is_complex() else float((diff.abs() ** 2).sum())
        rr = torch.where(both, rd, torch.zeros((), dtype=torch.float64, device=rd.device))
        ref2 += float((rr * rr).sum()) if not rr.is_complex() else float((rr.abs() ** 2).sum())
    return close, worst, math.sqrt(err2), math.sqrt(ref2)


def compare(reference: list[Any], candidate: list[Any], atol: float, rtol: float,
            mode: str = "strict") -> tuple[bool, str, dict[str, Any]]:
    """Same structure, shape, dtype; no NaN/Inf where the reference is finite; then per tensor:
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
            if r.is_floating_point() or r.is_complex():
                if bool((torch.isnan(c) & ~torch.isnan(r)).any()):
                    return False, f"{where} has NaN where the reference is a number", stats
                if bool((torch.isinf(c) & ~torch.isinf(r)).any()):
                    return False, f"{where} has Inf where the reference is finite", stats
            if not r.numel():
                continue
            close, worst, err, norm = _tensor_stats(r, c, atol, rtol)
            stats["max_abs_diff"] = max(stats["max_abs_diff"], worst)
            rel = err / norm if norm > 0 else (0.0 if worst <= atol else math.inf)
            stats["rel_l2"] = max(stats["rel_l2"], rel)
            if not close:
                stats["elementwise"] = False
                return False, f"{where} values differ (max abs diff {worst:.3g}, atol={atol:g}, rtol={rtol:g})", stats
            if mode == "strict" and not rel <= rtol:
                stats["scale"] = False
                return False, (f"{where} relative L2 error {rel:.3g} > {rtol:g} (within atol elementwise, "
                               f"but wrong at the output's own scale)"), stats
        else:
            if isinstance(r, float) and isinstance(c, (int, float)) and not isinstance(c, bool):
                if not math.isclose(c, r, rel_tol=rtol, abs_tol=atol if mode == "kernelbench" else 0.0) and \
                        not (mode == "strict" and r == 0 and abs(c) <= atol):
                    return False, f"{where} = {c!r}, reference {r!r}", stats
            elif c != r or type(c) is not type(r):
                return False, f"{where} = {c!r}, reference {r!r}", stats
    return True, "", stats


def identical(a: list[Any], b: list[Any]) -> bool:
    """Bit-for-bit equality (NaN equals NaN) of two value lists, for the input-mutation check."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            y = y.to(x.device)
            if x.is_floating_point() or x.is_complex():
                if not bool(((x == y) | (torch.isnan(x) & torch.isnan(y))).all()):
                    return False
            elif not torch.equal(x, y):
                return False
        elif x != y:
            return False
    return True
