"""The verifier's NPU backend (drkernel/verify/judging/backends.py) run against the fake torch.npu / torch_npu surface
read from the real torch_npu sources: timing with NPU events, syncs, seeds, profiler kernel times."""

from __future__ import annotations

import pytest
from fake_npu import TORCH_NPU, SurfaceError, _limit, install

from drkernel.verify.judging.backends import NpuBackend, make_backend


def test_events_time_the_call_and_every_stream_is_synced(monkeypatch, tmp_path):
    state = install(monkeypatch, tmp_path)
    backend = make_backend("npu")
    assert isinstance(backend, NpuBackend) and backend.timing_source == "npu_events"
    calls = []
    times = backend.time_call(lambda: calls.append(state.syncs))
    assert calls == [1]  # the device was synced before the call started
    assert state.syncs == 2  # and after it, before the closing event
    assert 0 <= times["stream_ms"] <= times["ms"] and times["wall_ms"] >= 0
    backend.seed(7)
    assert state.seeds == [7]
    assert backend.current_stream() == 0x5EED


def test_profiler_kernel_times_come_from_kernel_details_csv(monkeypatch, tmp_path):
    state = install(monkeypatch, tmp_path)
    kernels, setup_s = make_backend("npu").kernel_times(lambda: None)
    assert sorted(kernels) == sorted(state.kernels) and setup_s >= 0


def test_the_fake_cannot_offer_a_name_torch_npu_lacks():
    assert "elapsed_time" in TORCH_NPU["classes"]["torch.npu.Event"]

    class Invented:
        def elapsed_ms(self):
            return 0.0

    with pytest.raises(SurfaceError, match="elapsed_ms"):
        _limit(Invented, TORCH_NPU["classes"]["torch.npu.Event"], "torch.npu.Event")
