"""timing: cpu_model through the whole Verifier on CPU (issue 13): real fork-server children, the replay
child beside the judge, real Triton interpreter; the measured path is unchanged when it is off."""

from pathlib import Path

import pytest
from test_replay import CHAIN_FUSED, CHAIN_REF, HOST_SCALAR, NUMPY_HOST, SUM_REF

from drkernel.config.verifier import VerifyOptions
from drkernel.rl.rewards import RewardConfig, score
from drkernel.verify import Verifier

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "vector_add"
REFERENCE = (EXAMPLES / "reference.py").read_text()
HONEST = (EXAMPLES / "candidate.py").read_text()
MODEL = VerifyOptions(timing="cpu_model", num_correct_trials=1, timeout_s=120, measure_coverage=False)


@pytest.fixture(scope="module")
def verifier():
    with Verifier(device="cpu", max_concurrency=2) as v:
        yield v


def test_fused_candidate_gets_a_modelled_speedup_and_the_reward_uses_it(verifier):
    r = verifier.verify(CHAIN_REF, CHAIN_FUSED, MODEL)
    assert r.status == "ok" and r.correct and r.hack is None, r.error
    assert r.timing_source == "cpu_model"
    model = r.details["cpu_model"]
    assert model["gpu_profile"] == "h200"
    assert model["candidate"]["launches"] == 1 and model["reference"]["launches"] == 3
    assert r.speedup == pytest.approx(r.ref_runtime_ms / r.runtime_ms) and 2.5 < r.speedup < 3.5
    assert any(c.name == "cpu_model_replay" and c.passed for c in r.checks)
    assert score(r, RewardConfig()) == pytest.approx(0.5 + 0.5 * min(r.speedup, 3.0))


def test_other_profile_changes_the_modelled_times(verifier):
    h200 = verifier.verify(REFERENCE, HONEST, MODEL)
    a100 = verifier.verify(REFERENCE, HONEST, MODEL.model_copy(update={"gpu_profile": "a100"}))
    assert h200.timing_source == a100.timing_source == "cpu_model"
    # the same bytes and one launch each way; the kernel's priced pointer offsets on 4 of 132 SMs cost a few ns more
    assert a100.runtime_ms > h200.runtime_ms and h200.speedup == pytest.approx(1.0, rel=1e-3)


def test_host_work_passed_as_a_literal_fails_only_under_the_model(verifier):
    measured = verifier.verify(SUM_REF, HOST_SCALAR, MODEL.model_copy(update={"timing": "measured"}))
    assert measured.correct and measured.timing_source == "cpu_wall_roundtrip"  # correct, and looks like a kernel
    r = verifier.verify(SUM_REF, HOST_SCALAR, MODEL)
    assert r.status == "ok" and not r.correct and score(r) == 0.0 and r.speedup is None
    assert r.error.kind == "output_mismatch" and "never saw" in r.error.message
    assert any(c.name == "cpu_model_replay" and not c.passed for c in r.checks)


def test_work_done_in_numpy_fails_the_replay(verifier):
    measured = verifier.verify(REFERENCE, NUMPY_HOST, MODEL.model_copy(update={"timing": "measured"}))
    assert measured.correct  # right outputs and a Triton launch every call: only the model sees the host work
    r = verifier.verify(REFERENCE, NUMPY_HOST, MODEL)
    assert r.status == "ok" and not r.correct and score(r) == 0.0
    assert r.error.kind == "output_mismatch" and "never saw" in r.error.message
