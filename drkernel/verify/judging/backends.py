"""Device backends: how cpu | cuda | npu each seeds, syncs, times, flushes and profiles (the device timers).

The device itself is chosen by drkernel.devices. The backends run inside evaluation children, where torch is
already imported by the fork-server. CPU runs Triton through its interpreter (TRITON_INTERPRET=1): times there are
wall-clock and the timing-based hack checks are logic-level only. The NPU backend follows the public torch_npu API
and has not been run on Ascend hardware.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any


def env_for(device: str) -> dict[str, str]:
    """Environment a child needs for `device` before any candidate kernel is defined.

    On accelerators, expandable segments let the two children of an evaluation share a device
    with multi-gigabyte inputs without the caching allocator fragmenting it."""
    if device == "cpu":
        return {"TRITON_INTERPRET": "1"}
    if device == "cuda":
        return {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    return {}


class Backend:
    """What the harness asks of a device. Subclasses fill in the device-specific parts."""

    name = "cpu"
    timing_source = "cpu_wall"
    coverage_source = "cpu_wall"

    def __init__(self) -> None:
        import torch

        self.torch = torch

    @property
    def device(self) -> Any:
        return self.torch.device(self.name)

    def seed(self, seed: int) -> None:
        self.torch.manual_seed(seed)

    def synchronize(self) -> None:
        """Wait for all queued device work (every stream)."""

    def current_stream(self) -> int | None:
        """Handle of the harness's stream, to compare with the streams kernels launched on."""
        return None

    def flush_cache(self) -> None:
        """Evict the device's last-level cache between timed calls (no-op on CPU)."""

    def warm_libraries(self) -> None:
        """Make the device math libraries' handles now (a spare runner, before its evaluation exists)."""

    def time_call(self, fn: Callable[[], Any]) -> dict[str, float]:
        """Time one call: `ms` is the figure used; `stream_ms` excludes other streams (GPU only)."""
        t0 = time.perf_counter()
        fn()
        ms = (time.perf_counter() - t0) * 1e3
        return {"ms": ms, "stream_ms": ms, "wall_ms": ms}

    def kernel_times(self, run: Callable[[], None]) -> tuple[list[tuple[str, float]], float]:
        """Device kernels (name, microseconds) seen while `run` executes, and the profiler set-up seconds."""
        raise NotImplementedError("kernel profiling needs an accelerator; CPU coverage uses launch wall time")


class CpuBackend(Backend):
    pass


class CudaBackend(Backend):
    name = "cuda"
    timing_source = "cuda_events"
    coverage_source = "torch_profiler_cuda"
    FLUSH_BYTES = 256 * 1024 * 1024  # twice the H100/H200 L2

    def __init__(self) -> None:
        super().__init__()
        self._flush_buf = None

    def seed(self, seed: int) -> None:
        self.torch.manual_seed(seed)  # also seeds every CUDA device

    def synchronize(self) -> None:
        self.torch.cuda.synchronize()

    def current_stream(self) -> int | None:
        return int(self.torch.cuda.current_stream().cuda_stream)

    def flush_cache(self) -> None:
        if self._flush_buf is None:
            self._flush_buf = self.torch.empty(self.FLUSH_BYTES // 4, dtype=self.torch.int32, device=self.device)
        self._flush_buf.zero_()

    def warm_libraries(self) -> None:
        """cuBLAS and cuDNN make their handles on first use, and Triton's first kernel in a process builds its C
        utilities and sets up its compiler (measured on the H200: 0.3 s + about 0.45 s before any compile of the
        kernel itself, which took 0.07 s): a spare pays these while it waits instead of the first correctness
        trial. Both runners do the same, so neither side is favoured; no reference or candidate code runs here."""
        from drkernel.verify.judging import compare_kernel

        t = self.torch
        a = t.ones((8, 8), device=self.device)
        a @ a
        if t.backends.cudnn.is_available():
            t.nn.functional.conv2d(a.view(1, 1, 8, 8), a[:3, :3].reshape(1, 1, 3, 3))
        x = t.zeros(compare_kernel.MIN_ELEMENTS, device=self.device)
        compare_kernel.stats(x, x, 1e-2, 1e-2)  # a Triton kernel of the harness: compiled and launched once
        self.synchronize()
        t.cuda.empty_cache()

    def _events(self) -> tuple[Any, Any, Any]:
        ev = self.torch.cuda.Event
        return ev(enable_timing=True), ev(enable_timing=True), ev(enable_timing=True)

    def time_call(self, fn: Callable[[], Any]) -> dict[str, float]:
        start, end_stream, end_all = self._events()
        self.synchronize()
        w0 = time.perf_counter()
        start.record()
        fn()
        end_stream.record()  # ends when the harness stream's work is done
        self.synchronize()  # waits for every stream, so side-stream work is inside `ms`
        end_all.record()
        end_all.synchronize()
        wall = (time.perf_counter() - w0) * 1e3
        return {"ms": start.elapsed_time(end_all), "stream_ms": start.elapsed_time(end_stream), "wall_ms": wall}

    def kernel_times(self, run: Callable[[], None]) -> tuple[list[tuple[str, float]], float]:
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        t0 = time.perf_counter()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            setup_s = time.perf_counter() - t0
            run()
            self.synchronize()
        kernels = [
            (e.name(), e.duration_ns() / 1e3)
            for e in prof.profiler.kineto_results.events()
            if e.device_type() == DeviceType.CUDA
        ]
        return kernels, setup_s


class NpuBackend(Backend):
    """Ascend NPU through torch_npu (unverified here: written against the public API)."""

    name = "npu"
    timing_source = "npu_events"
    coverage_source = "torch_npu_profiler"
    FLUSH_BYTES = 192 * 1024 * 1024  # what the Ascend driver's do_bench flushes

    def __init__(self) -> None:
        super().__init__()
        import torch_npu  # noqa: F401  (registers torch.npu)

        self._flush_buf = None

    def seed(self, seed: int) -> None:
        self.torch.manual_seed(seed)
        self.torch.npu.manual_seed_all(seed)

    def synchronize(self) -> None:
        self.torch.npu.synchronize()

    def current_stream(self) -> int | None:
        return int(self.torch.npu.current_stream().npu_stream)

    def flush_cache(self) -> None:
        if self._flush_buf is None:
            self._flush_buf = self.torch.empty(self.FLUSH_BYTES // 4, dtype=self.torch.int32, device=self.device)
        self._flush_buf.zero_()

    def time_call(self, fn: Callable[[], Any]) -> dict[str, float]:
        ev = self.torch.npu.Event
        start, end_stream, end_all = ev(enable_timing=True), ev(enable_timing=True), ev(enable_timing=True)
        self.synchronize()
        w0 = time.perf_counter()
        start.record()
        fn()
        end_stream.record()
        self.synchronize()
        end_all.record()
        end_all.synchronize()
        wall = (time.perf_counter() - w0) * 1e3
        return {"ms": start.elapsed_time(end_all), "stream_ms": start.elapsed_time(end_stream), "wall_ms": wall}

    def kernel_times(self, run: Callable[[], None]) -> tuple[list[tuple[str, float]], float]:
        import csv
        import glob

        import torch_npu

        out_dir = os.path.join(os.environ.get("TMPDIR", "."), "npu_profile")
        t0 = time.perf_counter()
        with torch_npu.profiler.profile(
            activities=[torch_npu.profiler.ProfilerActivity.NPU],
            on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(out_dir),
        ):
            setup_s = time.perf_counter() - t0
            run()
            self.synchronize()
        kernels: list[tuple[str, float]] = []
        for path in glob.glob(os.path.join(out_dir, "**", "kernel_details.csv"), recursive=True):
            with open(path, newline="") as f:
                for row in csv.DictReader(f):
                    kernels.append((row.get("Name", ""), float(row.get("Duration(us)", 0) or 0)))
        return kernels, setup_s


def make_backend(device: str) -> Backend:
    """The backend object for a resolved device name (inside an evaluation child)."""
    return {"cpu": CpuBackend, "cuda": CudaBackend, "npu": NpuBackend}[device]()
