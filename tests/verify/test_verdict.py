"""The verdict under construction (drkernel.verify.verdict.Verdict): how evidence is recorded while the judge
runs, its JSON round trip to the caller, and what the finished VerifyResult reports and pays. Torch-free,
in-process; written against the survivors of a mutmut run over verdict.py (BENCHMARKS.md)."""

from __future__ import annotations

import json
import time

import pytest
from hack_names import hack

from drkernel.rl.rewards import RewardConfig, kernel_reward, score
from drkernel.verify.verdict import Verdict


def timed(**kw) -> Verdict:
    """A correct, compiled verdict with both times measured."""
    return Verdict(
        **{"compiled": True, "loaded": True, "correct": True, "cand_ms": 2.0, "ref_ms": 3.0, "coverage": 0.5, **kw}
    )


def test_checks_and_failures_are_recorded_in_order():
    v = Verdict()
    v.check("load", True)
    v.check("correctness", False, "output values differ")
    assert v.checks == [
        {"name": "load", "passed": True, "detail": ""},
        {"name": "correctness", "passed": False, "detail": "output values differ"},
    ]
    assert v.failed("correctness") and not v.failed("load") and not v.failed("timing")


def test_the_first_error_stands():
    v = Verdict()
    v.fail("runtime", "forward raised")
    v.fail("timeout", "later")
    assert v.error == {"kind": "runtime", "message": "forward raised"}


def test_hacks_keep_their_order_and_first_puts_the_cause_in_front():
    v = Verdict()
    v.hack(hack("decoy_kernel"), "triton_launches", "no launch")
    v.hack(hack("input_mutation"), "input_mutation", "changed x")
    assert v.hacks == ["decoy_kernel", "input_mutation"]
    assert v.checks[-1] == {"name": "input_mutation", "passed": False, "detail": "changed x"}
    assert v.failed("triton_launches") and v.failed("input_mutation")
    v.hack(hack("result_caching"), "correctness", "replayed", first=True)
    assert v.hacks == ["result_caching", "decoy_kernel", "input_mutation"]
    v.hack(hack("decoy_kernel"), "triton_launches", "again")  # seen again: recorded once, moved to the end
    assert v.hacks == ["result_caching", "input_mutation", "decoy_kernel"]
    v.hack(hack("input_mutation"), "input_mutation", "again", first=True)
    assert v.hacks == ["input_mutation", "result_caching", "decoy_kernel"]
    assert len(v.checks) == 5


def test_json_round_trip_is_plain_json_and_lossless():
    v = timed(device="cuda", details={"trials": 3}, phase_s={"load": 0.5})
    v.check("load", True)
    v.hack(hack("side_stream"), "launch_streams", "stream 7")
    v.fail("runtime", "boom")
    wire = json.loads(json.dumps(v.as_json()))
    assert Verdict.from_json(wire) == v
    assert wire["hacks"] == ["side_stream"] and wire["error"] == {"kind": "runtime", "message": "boom"}


def test_a_correct_timed_verdict():
    t0 = time.perf_counter()
    r = timed(phase_s={"load": 0.123456, "timing": 2.0}).result(t0)
    assert r.status == "ok" and r.compiled and r.correct and r.hack is None and r.error is None
    assert (r.runtime_ms, r.ref_runtime_ms, r.speedup, r.coverage) == (2.0, 3.0, 1.5, 0.5)
    assert r.device == "cpu" and r.timing_source == "cpu_wall_roundtrip"
    assert r.details["timing_note"].startswith("CPU Triton interpreter: times are wall-clock round trips")
    assert r.details["timing_note"].endswith("the timing-based checks are logic-level only")
    assert r.details["phase_s"] == {"load": 0.1235, "timing": 2.0}
    assert "all_hacks" not in r.details
    assert score(r) == kernel_reward(True, None, 1.5, 0.5, RewardConfig()) > 0  # priced by the caller
    assert "reward" not in r.model_dump()  # a verdict carries no price
    assert 0 <= r.elapsed_s < 60
    assert timed().result(time.perf_counter() - 5.0).elapsed_s >= 5.0  # the caller's clock, from its t0


def test_accelerator_times_carry_their_source_and_no_cpu_note():
    r = timed(device="cuda", checks=[{"name": "timing", "passed": True, "detail": "ok"}]).result(time.perf_counter())
    assert r.device == "cuda" and r.timing_source == "host_roundtrip_cuda" and "timing_note" not in r.details
    assert [(c.name, c.passed, c.detail) for c in r.checks] == [("timing", True, "ok")]
    assert timed(device="npu").result(0.0).timing_source == "host_roundtrip_npu"
    assert timed(timing_source="cpu_model").result(0.0).timing_source == "cpu_model"


def test_an_error_makes_the_verdict_incorrect_and_untimed():
    v = timed(details={"trials": 3})
    v.fail("output_mismatch", "output values differ")
    r = v.result(0.0)
    assert not r.correct and r.compiled and r.error is not None
    assert (r.error.kind, r.error.message) == ("output_mismatch", "output values differ")
    assert r.runtime_ms is r.ref_runtime_ms is r.speedup is r.coverage is r.timing_source is None
    assert "timing_note" not in r.details and r.details["trials"] == 3 and score(r) == 0.0


def test_an_incorrect_verdict_is_untimed_even_without_an_error():
    r = timed(correct=False).result(0.0)
    assert not r.correct and r.runtime_ms is r.speedup is r.coverage is r.timing_source is None


@pytest.mark.parametrize("times", [{"cand_ms": None}, {"ref_ms": None}])
def test_one_missing_time_means_untimed(times):
    r = timed(**times).result(0.0)
    assert r.correct and r.runtime_ms is r.ref_runtime_ms is r.speedup is r.timing_source is None
    assert r.coverage == 0.5


@pytest.mark.parametrize(
    ("cand_ms", "ref_ms", "speedup"), [(0.5, 1.0, 2.0), (0.0, 1.0, None), (-1.0, 1.0, None), (1.0, 0.0, None)]
)
def test_speedup_needs_two_positive_times(cand_ms, ref_ms, speedup):
    assert timed(cand_ms=cand_ms, ref_ms=ref_ms).result(0.0).speedup == speedup


def test_the_first_hack_is_the_verdict_and_all_are_listed():
    v = timed()
    v.hack(hack("decoy_kernel"), "triton_launches", "no launch")
    r = v.result(0.0)
    assert r.hack == "decoy_kernel" and "all_hacks" not in r.details and score(r) == 0.0
    assert r.correct and r.speedup == 1.5  # a hack does not hide the measurements, it zeroes the pay
    v.hack(hack("side_process"), "side_processes", "pid 9")
    r = v.result(0.0)
    assert r.hack == "decoy_kernel" and r.details["all_hacks"] == ["decoy_kernel", "side_process"]
