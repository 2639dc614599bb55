"""Issue 38 red-team: the CPU coverage pass is gone under `timing: cpu_model` and is one profiled call under
`timing: measured`. Through the whole Verifier (library path, fork-server, every sandbox layer), on the shipped
`elu` task. Rewards here are modelled (cpu_model) or structural, never a timing figure compared to another."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkernel.rl.rewards import score
from drkernel.verify import VerifyOptions
from drkernel.verify.engine import Verifier

HERE = Path(__file__).parent
TASK = HERE.parents[2] / "drkernel" / "tasks" / "library" / "elu"
REFERENCE = (TASK / "reference.py").read_text()
# Two trials, as configs/demo_cpu.yaml: the attacks count their calls against this number.
MODEL = VerifyOptions(device="cpu", timing="cpu_model", num_correct_trials=2, timeout_s=300)
MEASURED = VerifyOptions(device="cpu", num_correct_trials=2, min_perf_trials=3, num_perf_trials=5, timeout_s=300)


def _src(name: str) -> str:
    return (HERE / name).read_text()


@pytest.fixture(scope="module")
def verifier():
    with Verifier(device="cpu", max_concurrency=1) as v:
        yield v


@pytest.fixture(scope="module")
def honest_modelled(verifier) -> float:
    """The shipped fused solution's reward under the CPU model: the honest baseline."""
    r = verifier.verify(REFERENCE, (TASK / "solution_fused.py").read_text(), MODEL)
    assert r.status == "ok" and r.correct and r.hack is None, r.error
    return score(r)


def test_a_decoy_launch_still_earns_no_coverage_without_the_pass(verifier, honest_modelled) -> None:
    r = verifier.verify(REFERENCE, _src("redteam38_decoy_torch.py"), MODEL)
    assert r.status == "ok" and r.correct and r.timing_source == "cpu_model", r.error
    assert "coverage_pass_ms_judge" not in r.details  # no pass in the candidate's process ran
    assert r.details["coverage_source"].startswith("cpu_model") and r.coverage is not None and r.coverage < 0.01
    assert score(r) < honest_modelled


def test_stale_outputs_after_the_trace_are_caught(verifier) -> None:
    """The calls that were the coverage pass are re-validation now: a forward that stops computing after the
    trace is still compared."""
    r = verifier.verify(REFERENCE, _src("redteam38_stale_after_trace.py"), MODEL)
    assert r.status == "ok" and not r.correct and r.hack == "result_caching", (r.status, r.hack, r.error)
    assert score(r) == 0.0


def test_one_profiled_call_is_still_bounded_by_the_timed_calls(verifier) -> None:
    """Spinning in Triton on the calls after the trials raises only what those calls see; the coverage is the
    lower of the one profiled call's figure and the timed calls' own in-launch share."""
    r = verifier.verify(REFERENCE, _src("redteam38_pass_spin.py"), MEASURED)
    assert r.status == "ok" and r.correct and r.hack is None, r.error
    assert r.details["coverage_source"] == "cpu_wall_net"
    assert "1 fresh checked calls" in next(c.detail for c in r.checks if c.name == "coverage")
    assert r.coverage is not None and r.coverage <= r.details["coverage_timed_share"] + 1e-6


def test_a_traced_forward_without_a_launch_is_a_decoy(verifier) -> None:
    """Red team, issue 38 (older than it): a forward that launches a kernel in every compared call and none in the
    traced one was priced as plain torch (modelled speedup 1.0, reward 1.0 on elu, above the shipped solution_simple's
    0.74 and the same decoy with its launch traced, 0.75). The trusted replay's launch count now flags it."""
    decoy = verifier.verify(REFERENCE, _src("redteam38_decoy_torch.py"), MODEL)
    r = verifier.verify(REFERENCE, _src("redteam38_trace_no_launch.py"), MODEL)
    assert r.status == "ok" and decoy.status == "ok", (r.error, decoy.error)
    assert r.hack == "decoy_kernel" and score(r) == 0.0, (r.hack, r.details.get("cpu_model"))
    assert score(decoy) < 0.8  # the decoy whose launch is traced: a sliver of modelled coverage, no more
