"""The one device rule the core, the Serve replica and the HTTP ingress share: `auto` or the device they own."""

from __future__ import annotations

import pytest

from drkernel.config.verifier import VerifyOptions


@pytest.mark.parametrize("asked", ["auto", "cpu"])
def test_auto_or_the_owned_device_runs(asked):
    assert VerifyOptions(device=asked).device_refusal("cpu") is None


@pytest.mark.parametrize(("asked", "owned"), [("cuda", "cpu"), ("cpu", "npu"), ("npu", "cuda")])
def test_another_device_is_refused_naming_both(asked, owned):
    refusal = VerifyOptions(device=asked).device_refusal(owned)
    assert refusal is not None and repr(asked) in refusal and repr(owned) in refusal and "'auto'" in refusal
