"""Device choice: which of cpu | cuda | npu a process runs on, and what accelerators this host offers.

The project's one in-process device chooser, used by the trainer, SFT, both policy engines and the verifier
(`drkernel.placement` is its cluster-level counterpart, for Ray resource requests). `resolve_device` is pure
(it takes the availability map) so the choice is testable anywhere; the probes import torch.
"""

from __future__ import annotations

from collections.abc import Mapping

DEVICES = ("cpu", "cuda", "npu")


class DeviceUnavailable(ValueError):
    """The requested device is not present on this host (a bad value for `device`)."""


def resolve_device(requested: str, available: Mapping[str, bool]) -> str:
    """`auto` -> cuda, else npu, else cpu; an explicit device must be available (cpu always is)."""
    if requested == "auto":
        for name in ("cuda", "npu"):
            if available.get(name, False):
                return name
        return "cpu"
    if requested not in DEVICES:
        raise DeviceUnavailable(f"unknown device {requested!r}; choose auto, cpu, cuda or npu")
    if requested != "cpu" and not available.get(requested, False):
        raise DeviceUnavailable(f"device {requested!r} requested but not available on this host")
    return requested


def probe_availability() -> dict[str, bool]:
    """Which accelerators this process can see (imports torch; run it in a child, not the caller)."""
    import torch

    found = {"cpu": True, "cuda": bool(torch.cuda.is_available()), "npu": False}
    try:
        import torch_npu  # noqa: F401  (registers torch.npu)

        found["npu"] = bool(torch.npu.is_available())
    except Exception:  # torch_npu absent or broken: no NPU
        found["npu"] = False
    return found


def accelerator_memory() -> dict[str, int]:
    """Total memory in bytes of device 0 of each accelerator this process can see (imports torch)."""
    import torch

    found: dict[str, int] = {}
    if torch.cuda.is_available():
        found["cuda"] = int(torch.cuda.get_device_properties(0).total_memory)
    try:
        import torch_npu  # noqa: F401  (registers torch.npu)

        if torch.npu.is_available():
            found["npu"] = int(torch.npu.get_device_properties(0).total_memory)
    except Exception:  # torch_npu absent or broken: no NPU
        pass
    return found
