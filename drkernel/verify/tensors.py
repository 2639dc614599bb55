"""Tensor plumbing of the checks: moving outputs between children, comparing them, aliasing.

On CPU a tensor travels as raw bytes (no shared memory, no file descriptors to pass between
network namespaces); on CUDA it travels as an IPC handle through torch's multiprocessing
reductions, so gigabyte outputs are never copied to the host.
"""

from __future__ import annotations

import math
from typing import Any

import torch


class OutputError(ValueError):
    """A candidate output that cannot be compared (wrong type or structure)."""


def flatten(value: Any) -> list[Any]:
    """Outputs as a flat list: a tensor, or a (nested) tuple/list of tensors and scalars."""
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in flatten(item)]
    return [value]


def plain_tensor(t: Any) -> Any:
    """Reject tensor subclasses (they can fake comparisons); parameters become their data."""
    if isinstance(t, torch.nn.Parameter):
        t = t.data
    if isinstance(t, torch.Tensor) and type(t) is not torch.Tensor:
        raise OutputError(f"output is a {type(t).__name__}, not a plain torch.Tensor")
    return t


def pack(values: list[Any], ipc: bool) -> list[Any]:
    """Make values sendable: tensors as (dtype, shape, bytes) on CPU, as IPC-shared tensors on CUDA."""
    out: list[Any] = []
    for v in values:
        v = plain_tensor(v)
        if isinstance(v, torch.Tensor):
            v = v.detach()
            if ipc and v.is_cuda:
                out.append(("ipc", v.contiguous()))
            else:
                flat = v.to("cpu").contiguous().reshape(-1)
                data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
                out.append(("raw", str(v.dtype).removeprefix("torch."), tuple(v.shape), data))
        elif isinstance(v, (int, float, bool, complex, str, type(None))):
            out.append(("py", v))
        else:
            raise OutputError(f"value of type {type(v).__name__} cannot be compared")
    return out


def unpack(packed: list[Any], device: torch.device) -> list[Any]:
    values: list[Any] = []
    for item in packed:
        tag = item[0]
        if tag == "ipc":
            values.append(item[1])
        elif tag == "raw":
            _, dtype_name, shape, data = item
            dtype = getattr(torch, dtype_name)
            if data:
                t = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype).reshape(shape)
            else:
                t = torch.empty(shape, dtype=dtype)
            values.append(t.to(device))
        else:
            values.append(item[1])
    return values


def storages_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when two tensors share any byte of storage (views, `as_strided`, the same tensor)."""
    if a.device != b.device:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    if sa.nbytes() == 0 or sb.nbytes() == 0:
        return False
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()


def aliases_any(outputs: list[Any], inputs: list[Any]) -> bool:
    tensors_in = [x for x in inputs if isinstance(x, torch.Tensor)]
    return any(isinstance(o, torch.Tensor) and storages_overlap(o, x) for o in outputs for x in tensors_in)


def compare(reference: list[Any], candidate: list[Any], atol: float, rtol: float) -> tuple[bool, str, dict[str, float]]:
    """Same structure, shape, dtype; no NaN/Inf where the reference is finite; allclose per leaf."""
    if len(reference) != len(candidate):
        return False, f"output count {len(candidate)} != reference {len(reference)}", {}
    stats: dict[str, float] = {"max_abs_diff": 0.0}
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
            if r.numel():
                diff = (c.double() - r.double()).abs()
                finite = diff[torch.isfinite(diff)]
                if finite.numel():
                    stats["max_abs_diff"] = max(stats["max_abs_diff"], float(finite.max()))
            if not torch.allclose(c, r, atol=atol, rtol=rtol, equal_nan=True):
                return False, f"{where} values differ (max abs diff {stats['max_abs_diff']:.3g})", stats
        else:
            if isinstance(r, float) and isinstance(c, (int, float)):
                if not math.isclose(c, r, rel_tol=rtol, abs_tol=atol):
                    return False, f"{where} = {c!r}, reference {r!r}", stats
            elif c != r:
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
