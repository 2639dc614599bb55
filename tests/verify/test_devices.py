"""Device selection (pure) and the CPU backend's timing, exercised for real."""

import pytest

from drkernel.devices import DeviceUnavailable, resolve_device
from drkernel.verify.judging.backends import CpuBackend, env_for, make_backend


@pytest.mark.parametrize(
    "available, expected",
    [
        ({"cuda": True, "npu": True}, "cuda"),
        ({"cuda": True, "npu": False}, "cuda"),
        ({"cuda": False, "npu": True}, "npu"),
        ({"cuda": False, "npu": False}, "cpu"),
        ({}, "cpu"),
    ],
)
def test_auto_prefers_cuda_then_npu_then_cpu(available, expected):
    assert resolve_device("auto", available) == expected


def test_explicit_device_must_be_available():
    assert resolve_device("cpu", {}) == "cpu"
    assert resolve_device("npu", {"npu": True}) == "npu"
    with pytest.raises(DeviceUnavailable, match="cuda"):
        resolve_device("cuda", {"cuda": False, "npu": True})
    with pytest.raises(DeviceUnavailable, match="unknown device"):
        resolve_device("tpu", {"tpu": True})


def test_cpu_runs_triton_through_the_interpreter():
    assert env_for("cpu") == {"TRITON_INTERPRET": "1"}
    assert env_for("cuda") == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}


def test_cpu_backend_times_with_the_wall_clock():
    backend = make_backend("cpu")
    assert isinstance(backend, CpuBackend) and backend.timing_source == "cpu_wall"
    import time

    t = backend.time_call(lambda: time.sleep(0.02))
    assert 15 <= t["ms"] < 500 and t["ms"] == t["wall_ms"] == t["stream_ms"]
    assert backend.current_stream() is None
    with pytest.raises(NotImplementedError):
        backend.kernel_times(lambda: None)
