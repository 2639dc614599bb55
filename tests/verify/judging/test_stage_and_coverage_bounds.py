"""Issue 35: the judge's time and coverage do not rest on the gate. Work a candidate's process does when it receives
its inputs ("stage") is charged to it, and candidate-file code that Triton's launcher calls inside a launch is not
kernel time. Both attacks earned a reward above the honest one before (red on 92950bf)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

import drkernel.verify.process.interpreter_env  # noqa: F401  (before triton)
from drkernel.verify import VerifyOptions
from drkernel.verify.engine import Verifier
from drkernel.verify.harness import coverage, problem
from drkernel.verify.harness.launches import LaunchRecorder
from drkernel.verify.judging.timing_phase import stage_charge

HERE = Path(__file__).parents[1] / "issue35"
REFERENCE = (HERE / "ref_matmul_rowsum.py").read_text()
MEASURED = VerifyOptions(
    device="cpu", timing="measured", num_correct_trials=1, num_perf_trials=5, num_warmup=1, timeout_s=300
)


def test_stage_charge_is_the_median_excess() -> None:
    assert stage_charge([]) == 0.0
    assert stage_charge([0.05 + 1e-4 * i for i in range(10)]) == pytest.approx(0.05045)
    assert stage_charge([(-1) ** i * 1e-3 for i in range(10)]) == 0.0  # noise around zero: nothing charged
    assert stage_charge([-0.01] * 10) == 0.0  # a faster stage earns nothing
    # work moved into the stage of only 6 rounds of 10: the median run is fast, so the charge must be the work
    assert stage_charge([0.05] * 6 + [0.0] * 4) == pytest.approx(0.05)


@pytest.mark.integration
def test_work_done_on_receiving_the_inputs_is_charged() -> None:
    with Verifier(device="cpu", max_concurrency=1) as verifier:
        r = verifier._verify_ungated(REFERENCE, (HERE / "stage_work.py").read_text(), MEASURED)
    assert r.status == "ok" and r.correct, r.error
    # 200 ms of waiting in every stage on top of the work: charged to the candidate's time (red on 92950bf: speedup
    # 6.2, coverage 0.93, reward 2.47 against the honest 1.01); the speedup figure itself moves with the host's load.
    assert r.details["stage_charge_ms"] > 100, r.details.get("stage_ms")
    assert r.runtime_ms >= r.details["stage_charge_ms"]
    assert r.coverage < 0.5, (r.coverage, r.details.get("coverage_stage_excess_ms"))


@pytest.mark.integration
def test_work_in_the_background_after_staging_cannot_hide_behind_the_reference() -> None:
    """The reference sleeps 300 ms; the candidate's background thread takes as long. Nine rounds, five with the
    reference first: while both runners were staged before either ran, those rounds hid the work (red on 92950bf:
    candidate rounds of 2-6 ms, speedup 51, coverage 0.97, reward 2.48; in a run on a busier box 2-18 ms and 1.56).
    Now no round of the candidate, nor its coverage pass, can end before its work."""
    every_round = MEASURED.model_copy(update={"num_perf_trials": 9, "timing_precision": 0.0})
    with Verifier(device="cpu", max_concurrency=1) as verifier:
        r = verifier._verify_ungated(
            (HERE / "ref_sleepy_rowsum.py").read_text(), (HERE / "background_work.py").read_text(), every_round
        )
    assert r.status == "ok" and r.correct, r.error
    assert min(r.details["rounds_ms"]["candidate"]) > 200, (r.details.get("rounds_ms"), r.details.get("stage_ms"))
    # the coverage pass too: its forward waits for the work instead of finding it done during the reference's run
    assert r.coverage < 0.5, (r.coverage, r.details.get("forward_ms_per_call"))


@pytest.mark.integration
def test_a_coverage_pass_told_apart_by_counting_calls_is_bounded_by_the_timed_calls() -> None:
    """Red-team finding F3 (gate-legal): the pass ran the honest kernel, the timed calls eager work plus a touch.
    Red on 92950bf and on 8baf003: coverage about 1.0."""
    opts = MEASURED.model_copy(update={"num_perf_trials": 3, "timing_precision": 0.0})
    with Verifier(device="cpu", max_concurrency=1) as verifier:
        r = verifier.verify(
            (HERE / "ref_short_sleep_mm.py").read_text(), (HERE / "coverage_call_count.py").read_text(), opts
        )
    assert r.status == "ok" and r.correct and r.hack is None, (r.hack, r.error)
    assert r.details["calls_per_round"] == 1  # the schedule the candidate counts on
    assert r.coverage < 0.5, (r.coverage, r.details.get("coverage_timed_share"), r.details.get("calls_per_round"))


@pytest.mark.integration
def test_a_coverage_claim_above_the_judges_timing_is_voided() -> None:
    """Red-team finding F4: 10 s of kernel time claimed for a pass of milliseconds read as coverage 1.0 (clipped)."""
    opts = MEASURED.model_copy(update={"num_perf_trials": 3, "timing_precision": 0.0})
    with Verifier(device="cpu", max_concurrency=1) as verifier:
        r = verifier._verify_ungated(REFERENCE, (HERE / "forged_coverage.py").read_text(), opts)
    assert r.status == "ok" and r.correct, r.error
    assert r.coverage == 0.0, (r.coverage, r.details.get("coverage_pass_ms_judge"))
    crosscheck = next(c for c in r.checks if c.name == "coverage_crosscheck")
    assert not crosscheck.passed and "not believed" in crosscheck.detail, crosscheck.detail


@pytest.mark.integration
def test_the_candidate_is_stopped_while_the_reference_is_timed() -> None:
    """Red-team finding F2: a thread of the candidate's ran beside the reference's timed calls (and slowed them: reward
    2.3 against 1.1). Red before the fix: the watching thread never saw its process stopped, re-validation failed."""
    opts = MEASURED.model_copy(
        update={"num_perf_trials": 3, "timing_precision": 0.0, "measure_coverage": False, "require_triton": True}
    )
    with Verifier(device="cpu", max_concurrency=1) as verifier:
        r = verifier._verify_ungated(
            (HERE / "ref_sleep_250.py").read_text(), (HERE / "runs_beside_reference.py").read_text(), opts
        )
    assert r.status == "ok" and r.correct and r.hack is None, (r.hack, r.error)
    assert r.details["calls_per_round"] == 1


def _coverage_of(name: str, rows: int) -> tuple[dict, list, list]:
    path = str(HERE / name)
    recorder = LaunchRecorder(path)
    recorder.install()
    try:
        module = problem.import_file(path, name.removesuffix(".py"))
        recorder.note_module(module)
        sets = [[torch.randn(rows, 384), torch.randn(384, 384)] for _ in range(2)]
        model = module.ModelNew()
        coverage.cpu_coverage(recorder, model, sets[:1])  # as in the verifier, after the first calls (Triton's rewrite)
        report, outs = coverage.cpu_coverage(recorder, model, sets)
    finally:
        recorder.uninstall()
    return report, outs, sets


def test_candidate_code_the_launcher_calls_is_not_kernel_time() -> None:
    report, outs, sets = _coverage_of("grid_work.py", 384)
    for out, (x, w) in zip(outs, sets):
        torch.testing.assert_close(out, torch.relu(x @ w).sum(dim=1))
    # nine 384^3 matmuls in the grid function against a one-program copy kernel
    assert report["fraction"] < 0.5, report


@pytest.mark.parametrize("name", ["grid_work.py", "prerun_hook.py"])
def test_work_triton_s_launcher_runs_is_not_kernel_time_in_timed_calls(name: str) -> None:
    """Red-team findings F6 and F7 (both pass the gate): torch work in the grid function or a pre-run hook (a C
    function called from Triton's own frames) counted as kernel time in every call outside the coverage pass's
    profiler, and the hook's in the pass too. A launch's time is now its programs' only."""
    path = str(HERE / name)
    recorder = LaunchRecorder(path)
    recorder.install()
    try:
        module = problem.import_file(path, name.removesuffix(".py") + "_timed")
        recorder.note_module(module)
        model = module.ModelNew()
        x, w = torch.randn(384, 384), torch.randn(384, 384)
        with torch.no_grad():
            model(x, w)  # Triton's rewrite of the body, once
            recorder.begin()
            t0 = time.perf_counter()
            out = model(x, w)
            total = time.perf_counter() - t0
            kernel = recorder.end().candidate_seconds()
        report, _ = coverage.cpu_coverage(recorder, model, [[x, w]])
    finally:
        recorder.uninstall()
    torch.testing.assert_close(out, torch.relu(x @ w).sum(dim=1), atol=1e-3, rtol=1e-3)
    assert kernel < 0.5 * total, (kernel, total)
    assert report["fraction"] < 0.5, report


def test_an_honest_kernels_time_is_still_kernel_time() -> None:
    report, outs, sets = _coverage_of("honest_rowsum.py", 32)
    for out, (x, w) in zip(outs, sets):
        torch.testing.assert_close(out, torch.relu(x @ w).sum(dim=1), atol=1e-3, rtol=1e-3)
    assert report["fraction"] > 0.5, report  # 32 interpreted programs against one small eager matmul
