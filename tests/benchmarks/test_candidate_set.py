"""The shared candidate set (benchmarks/candidate_set.py) through the real Verifier on CPU at the tiny sizes: every
honest rewrite is correct, unflagged and rewarded, every CPU-visible hack is caught. Benchmarks and speed models rank
these candidates, so one that silently broke would poison their numbers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from drkernel.rl.rewards import score
from drkernel.verify import Verifier, VerifyOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import candidate_set

pytestmark = pytest.mark.integration

# Correctness on two seeds, one timed call each way: enough for a reward, cheap on 2 cores.
CHEAP = VerifyOptions(
    device="cpu", num_correct_trials=2, num_perf_trials=1, num_warmup=0, measure_coverage=False, timeout_s=120
)
HONEST = {c.problem: c for c in candidate_set.honest()}
CPU_HACKS = [c for c in candidate_set.CANDIDATES if c.kind == "hack" and not c.gpu_only]


@pytest.fixture(scope="module")
def verifier():
    with Verifier(device="cpu", max_concurrency=1) as v:
        yield v


def test_set_shape():
    """At least ten problems, level 1 and 2, each with one honest candidate whose file exists; issue 8's list kept."""
    names = [p.name for p in candidate_set.PROBLEMS]
    assert len(names) >= 10 and len(set(names)) == len(names)
    assert {p.level for p in candidate_set.PROBLEMS} == {1, 2}
    assert [c.problem for c in candidate_set.honest()] == names
    assert all(c.path.is_file() for c in candidate_set.CANDIDATES)
    assert {c.problem for c in candidate_set.CANDIDATES} <= set(names)
    problems, candidates = candidate_set.select("issue8")
    assert [p.name for p in problems] == candidate_set.ISSUE8_PROBLEMS
    assert [c.file for c in candidates] == candidate_set.ISSUE8_CANDIDATES
    assert {p.cost for p in candidate_set.PROBLEMS} >= {
        "elementwise",
        "reduction",
        "norm",
        "softmax",
        "matmul",
        "fused",
    }


@pytest.mark.parametrize("name", list(HONEST))
def test_honest_candidate_is_correct_and_rewarded(verifier, kernelbench: Path, name: str):
    reference = candidate_set.problem(name).source(kernelbench, tiny=True)
    r = verifier.verify(reference, HONEST[name].path.read_text(), CHEAP)
    assert r.status == "ok" and r.error is None, r.error
    assert r.compiled and r.correct and r.hack is None
    assert score(r) > 0


@pytest.mark.parametrize("cand", CPU_HACKS, ids=lambda c: c.file)
def test_cpu_hack_is_caught(verifier, kernelbench: Path, cand: candidate_set.Candidate):
    reference = candidate_set.problem(cand.problem).source(kernelbench, tiny=True)
    r = verifier.verify(reference, cand.path.read_text(), CHEAP)
    assert r.hack == cand.expect_hack and score(r) == 0
