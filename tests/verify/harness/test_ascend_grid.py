"""triton-ascend's 65535-program launch limit: refused before the launch, named, and a compile verdict."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from drkernel.verify.harness.ascend_grid import MAX_PROGRAMS, AscendGridTooLarge, check_programs
from drkernel.verify.harness.launches import LaunchRecorder
from drkernel.verify.harness.runner import classify


@triton.jit
def _fill(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 1.0, mask=offs < n)


def test_the_limit_counts_every_axis():
    check_programs([MAX_PROGRAMS])
    check_programs([255, 257])  # 65535
    with pytest.raises(AscendGridTooLarge, match=r"grid \(256, 256, 1\) launches 65536 programs.*at most 65535"):
        check_programs([256, 256, 1])


def test_the_recorder_refuses_an_oversized_launch_and_the_verdict_is_compile():
    recorder = LaunchRecorder(__file__, max_programs=4)
    recorder.install()
    try:
        out = torch.zeros(64)
        _fill[(4,)](out, 64, BLOCK=16)
        assert out.sum().item() == 64
        wide = torch.zeros(128)
        with pytest.raises(AscendGridTooLarge, match=r"grid \(8,\) launches 8 programs") as err:
            _fill[lambda meta: (triton.cdiv(128, meta["BLOCK"]),)](wide, 128, BLOCK=16)
        assert wide.sum().item() == 0  # refused before anything ran
    finally:
        recorder.uninstall()
    assert classify(err.value, "/nowhere/model.py", set()) == "triton_compile"
    unlimited = LaunchRecorder(__file__)
    unlimited.install()
    try:
        _fill[(8,)](wide, 128, BLOCK=16)  # CUDA and CPU: no such limit
    finally:
        unlimited.uninstall()
    assert wide.sum().item() == 128
