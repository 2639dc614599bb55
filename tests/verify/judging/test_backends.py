"""The device backends: the CPU backend's environment and timing, exercised for real."""

import pytest

from drkernel.verify.judging.backends import CpuBackend, env_for, make_backend


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
