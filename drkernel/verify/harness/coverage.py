"""Triton time coverage, measured inside the candidate's process (so believed only to lower a reward).

Time is attributed by kernel object, never by a name the candidate chose:
- accelerators: a profiler pass; a kernel name counts as the candidate's only when the number of
  device kernels carrying it equals the number of launches the wrapper of the candidate's own JIT
  objects recorded. A candidate kernel named like a library kernel (cuBLAS `nvjet_*`, say) that it
  launches next to that library kernel gets more events than launches: that name counts for nothing.
- CPU (Triton interpreter): wall time inside the candidate's launches, less the time the kernel
  bodies spend in calls to anything but Triton (torch work or plain Python inside a jit body).
The judge then caps the result with its own timing (kernel time per call above the trusted time per
call cannot be real).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import torch

from drkernel.verify.harness.launches import LaunchRecorder


def cpu_coverage(recorder: LaunchRecorder, model: Any, sets: list[Any]) -> tuple[dict[str, Any], list[Any]]:
    """One call per input set the judge staged for this pass (fresh, distinct sets: the pass cannot be told
    apart from the checked calls by its inputs); the outputs go back to be compared like any call's."""
    total = kernel = 0.0
    outputs = []
    recorder.track_foreign = True
    try:
        with torch.no_grad():
            for inputs in sets:
                recorder.begin()
                t0 = time.perf_counter()
                outputs.append(model(*inputs))
                total += time.perf_counter() - t0
                kernel += recorder.end().candidate_seconds()
    finally:
        recorder.track_foreign = False
    calls = max(len(sets), 1)
    fraction = min(1.0, kernel / total) if total > 0 else None
    return {
        "kernel_ms_per_call": kernel / calls * 1e3,
        "fraction": fraction,
        "source": "cpu_wall_net",
        "detail": {"forward_ms_per_call": total / calls * 1e3},
        "collisions": [],
    }, outputs


def device_coverage(
    recorder: LaunchRecorder, backend: Any, model: Any, sets: list[Any]
) -> tuple[dict[str, Any], list[Any]]:
    launched: Counter[str] = Counter()
    outputs: list[Any] = []

    def run() -> None:
        with torch.no_grad():
            for inputs in sets:
                recorder.begin()
                outputs.append(model(*inputs))
                launched.update(x.name for x in recorder.end().candidate_launches())

    kernels, setup_s = backend.kernel_times(run)
    calls = max(len(sets), 1)
    events = Counter(name for name, _ in kernels)
    collisions = sorted(n for n in launched if events[n] != launched[n])
    mine_names = {n for n in launched if events[n] == launched[n]}
    total = sum(d for _, d in kernels)
    mine = sum(d for name, d in kernels if name in mine_names)
    return {
        "kernel_ms_per_call": mine / 1e3 / calls,
        "fraction": (mine / total) if total > 0 else None,
        "source": backend.coverage_source,
        "collisions": collisions[:10],
        "detail": {
            "profiler_setup_s": setup_s,
            "profiler_kernel_ms_per_call": total / 1e3 / calls,
            "profiler_kernels": float(len(kernels)),
        },
    }, outputs
