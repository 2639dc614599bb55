"""Device choice (drkernel.devices): pure, from an availability map."""

import pytest

from drkernel.devices import DeviceUnavailable, resolve_device


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
