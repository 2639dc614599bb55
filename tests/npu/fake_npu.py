"""A CPU stand-in for torch.npu and torch_npu that offers only the names tests/npu/api_surface.json lists.

The fixture is read from the real torch_npu sources (tests/npu/derive_api_surface.py). A name the fixture lacks
is an AttributeError here as it would be on Ascend; a listed name this fake has not implemented raises
NotImplementedError when called, so a test never passes on an invented behaviour. Every implemented name is
checked against the fixture when the fake is built.
"""

from __future__ import annotations

import csv
import json
import os
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

SURFACE = json.loads(Path(__file__).with_name("api_surface.json").read_text())
TORCH_NPU = SURFACE["torch_npu"]


class SurfaceError(AssertionError):
    """The fake implements a name the real package does not define."""


def _limit(cls: type, listed: list[str], owner: str) -> type:
    """`cls` after checking that every public method it implements is one the real class has."""
    own = {n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}
    own |= {n for n, v in vars(cls).items() if isinstance(v, property)}
    extra = own - set(listed)
    if extra:
        raise SurfaceError(f"the fake {owner} implements {sorted(extra)}, which the real one does not define")
    return cls


class FakeEvent:
    """torch.npu.Event timed with the host clock; `record` is where the harness says the device reached."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.enable_timing = enable_timing
        self.at: float | None = None

    def record(self, stream: Any = None) -> None:
        self.at = time.perf_counter()

    def synchronize(self) -> None:
        if self.at is None:
            raise RuntimeError("synchronize on an event never recorded")

    def elapsed_time(self, end_event: FakeEvent) -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("both events need enable_timing=True")
        if self.at is None or end_event.at is None:
            raise RuntimeError("elapsed_time of an event never recorded")
        return (end_event.at - self.at) * 1e3


class FakeStream:
    @property
    def npu_stream(self) -> int:
        return 0x5EED


class NpuState:
    """What the code under test did to the fake device."""

    def __init__(self) -> None:
        self.syncs = 0
        self.seeds: list[int] = []
        self.kernels: list[tuple[str, float]] = [("add_kernel_0", 12.5), ("aclnnAdd_AddAiCore_Add", 3.0)]


def _profiler(state: NpuState) -> types.ModuleType:
    """torch_npu.profiler: `profile` as a context manager whose trace handler writes kernel_details.csv with the
    real header row; `ProfilerActivity` with the real members."""
    activity = types.SimpleNamespace(**{m: m for m in TORCH_NPU["classes"]["torch_npu.profiler.ProfilerActivity"]})
    headers = TORCH_NPU["kernel_details_csv"]["headers"]

    def tensorboard_trace_handler(dir_name: str) -> Callable[[Any], None]:
        def write(_prof: Any) -> None:
            folder = Path(dir_name) / "host_1234_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
            folder.mkdir(parents=True, exist_ok=True)
            with open(folder / TORCH_NPU["kernel_details_csv"]["file"], "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=headers)
                writer.writeheader()
                for name, us in state.kernels:
                    writer.writerow({h: "" for h in headers} | {"Name": name, "Duration(us)": us})

        return write

    class profile:
        def __init__(self, activities: list[Any] | None = None, on_trace_ready: Callable | None = None, **_: Any):
            if not activities or any(a not in vars(activity).values() for a in activities):
                raise ValueError(f"unknown profiler activities {activities}")
            self.on_trace_ready = on_trace_ready

        def __enter__(self) -> profile:
            return self

        def __exit__(self, *exc: Any) -> None:
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)

    implemented = {
        "profile": profile,
        "ProfilerActivity": activity,
        "tensorboard_trace_handler": tensorboard_trace_handler,
    }
    return _module("torch_npu.profiler", implemented, TORCH_NPU["modules"]["torch_npu.profiler"])


def _module(name: str, implemented: dict[str, Any], listed: list[str]) -> types.ModuleType:
    extra = set(implemented) - set(listed)
    if extra:
        raise SurfaceError(f"the fake {name} implements {sorted(extra)}, which the real one does not define")
    module = types.ModuleType(name)
    for attr in listed:
        if attr in implemented:
            setattr(module, attr, implemented[attr])
        else:

            def missing(*_a: Any, _attr: str = attr, **_k: Any) -> Any:
                raise NotImplementedError(f"the fake {name}.{_attr} is not implemented (the real one exists)")

            setattr(module, attr, missing)
    return module


def build(state: NpuState) -> tuple[types.ModuleType, types.ModuleType]:
    """(torch.npu, torch_npu) fakes sharing `state`."""
    listed = TORCH_NPU["modules"]["torch.npu"]
    event = _limit(FakeEvent, TORCH_NPU["classes"]["torch.npu.Event"], "torch.npu.Event")
    stream = _limit(FakeStream, TORCH_NPU["classes"]["torch.npu.Stream"], "torch.npu.Stream")

    def synchronize(device: Any = None) -> None:
        state.syncs += 1

    implemented = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "synchronize": synchronize,
        "current_stream": lambda device=None: stream(),
        "Event": event,
        "Stream": stream,
        "manual_seed": lambda seed: state.seeds.append(seed),
        "manual_seed_all": lambda seed: state.seeds.append(seed),
        "get_device_properties": lambda device=None: types.SimpleNamespace(total_memory=64 << 30, name="Ascend910B"),
    }
    npu = _module("torch.npu", implemented, listed)
    torch_npu = types.ModuleType("torch_npu")
    torch_npu.npu = npu
    torch_npu.profiler = _profiler(state)
    return npu, torch_npu


def install(monkeypatch: Any, tmp_path: Path) -> NpuState:
    """Put the fakes where `import torch_npu` and `torch.npu` find them, for one test."""
    import sys

    import torch

    state = NpuState()
    npu, torch_npu = build(state)
    monkeypatch.setitem(sys.modules, "torch_npu", torch_npu)
    monkeypatch.setitem(sys.modules, "torch_npu.profiler", torch_npu.profiler)
    monkeypatch.setattr(torch, "npu", npu, raising=False)
    monkeypatch.setenv("TMPDIR", os.fspath(tmp_path))
    return state
