"""Issue 27, third red-team round on the CPU cost model, through the whole Verifier (library path, real fork-server
children, Triton interpreter, recipe reward). Each candidate here earned reward on CPU that it would not earn on a
GPU: a TF32 dot judged in exact fp32, a matmul as a half-width complex mm, Triton coverage from interpreter time."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkernel.rl.rewards import score
from drkernel.verify import VerifyOptions
from drkernel.verify.engine import Verifier

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent
MATMUL_1024 = (HERE / "ref_matmul_1024.py").read_text()
LONG_K = (HERE / "ref_matmul_long_k.py").read_text()
MODEL = VerifyOptions(device="cpu", timing="cpu_model", num_correct_trials=1, timeout_s=300, measure_coverage=False)


def _src(name: str) -> str:
    return (HERE / name).read_text()


@pytest.fixture(scope="module")
def verifier():
    with Verifier(device="cpu", max_concurrency=1) as v:
        yield v


def test_tf32_dot_is_judged_with_tf32_operands_in_the_candidates_process(verifier) -> None:
    """The measured path too (no replay): the candidate's own process computes the dot as the GPU would."""
    options = VerifyOptions(device="cpu", num_correct_trials=2, measure_performance=False, measure_coverage=False)
    r = verifier.verify(LONG_K, _src("cpu_model_tf32_dot.py"), options)
    assert r.status == "ok" and not r.correct and score(r) == 0.0, (r.status, r.correct, r.error)
    assert r.error is not None and r.error.kind == "output_mismatch" and "values differ" in r.error.message
    honest = verifier.verify(LONG_K, _src("honest_ieee_dot.py"), options)
    assert honest.status == "ok" and honest.correct, honest.error


def test_complex_matmul_is_priced_by_its_real_arithmetic(verifier) -> None:
    r = verifier.verify(MATMUL_1024, _src("cpu_model_complex_mm.py"), MODEL)
    assert r.status == "ok" and r.correct and r.timing_source == "cpu_model", r.error
    # twice the reference's real flops on the same fp32 pipe, plus a widening pass: slower than the reference
    assert r.speedup is not None and r.speedup < 0.6, r.details["cpu_model"]
    assert score(r) < 0.5 + 0.5 * 0.6


def test_coverage_under_the_model_is_the_modelled_triton_share(verifier) -> None:
    options = MODEL.model_copy(update={"measure_coverage": True})
    r = verifier.verify(MATMUL_1024, _src("cpu_model_token_coverage.py"), options)
    assert r.status == "ok" and r.correct and r.timing_source == "cpu_model", r.error
    # the interpreter's 16-element copy would take a large share of CPU wall time; it is next to nothing of the
    # modelled device time, and no pass in the candidate's process is run for a figure the reward never used
    assert "coverage_pass_ms_judge" not in r.details and "forward_ms_per_call" not in r.details  # no pass of its own
    assert r.details["coverage_source"].startswith("cpu_model") and r.coverage is not None and r.coverage < 0.01
    assert score(r) == pytest.approx(0.5 + 0.5 * min(r.speedup, 3.0) + 0.5 * r.coverage)
    assert score(r) < 1.01
