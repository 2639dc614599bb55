"""The verifier's default trial counts and tolerances, pinned: a silent change moves every reward of a run.

The defaults are pinned on VerifyOptions itself, and the counts a CPU evaluation really uses (the CPU
substitutes 5 timed rounds and 1 warm-up when the caller leaves them unset) are read back from a real
evaluation's check details.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from drkernel.verify import Verifier, VerifyOptions

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vector_add"


def test_verify_option_defaults():
    o = VerifyOptions()
    assert (o.atol, o.rtol, o.correctness) == (1e-2, 1e-2, "strict")
    assert (o.num_correct_trials, o.num_perf_trials, o.num_warmup) == (5, 30, 3)
    assert (o.timeout_s, o.device, o.entry_point) == (180.0, "auto", "Model")
    assert o.require_triton and o.measure_performance and o.measure_coverage
    assert (o.memory_limit_mb, o.output_limit_bytes) == (16384, 65536)
    assert o.model_fields_set == set()  # what lets the CPU tell "left unset" from "asked for 30"


def _counts(options: VerifyOptions, verifier: Verifier) -> tuple[int, int, int]:
    """(correctness trials, timed rounds, warm-ups) of one real evaluation, from its check details."""
    reference, candidate = (EXAMPLE / "reference.py").read_text(), (EXAMPLE / "candidate.py").read_text()
    result = verifier.verify(reference, candidate, options.model_copy(update={"measure_coverage": False}))
    assert result.correct and result.speedup is not None, result.error
    details = {c.name: c.detail for c in result.checks}
    trials = re.match(r"(\d+)/(\d+) trials", details["correctness"])
    timing = re.search(r"median of (\d+) interleaved rounds .* after (\d+) warm-up", details["timing"])
    assert trials and timing and trials[1] == trials[2], details
    return int(trials[2]), int(timing[1]), int(timing[2])


@pytest.fixture(scope="module")
def verifier():
    with Verifier(device="cpu", max_concurrency=1) as v:
        yield v


def test_counts_a_cpu_evaluation_uses(verifier):
    assert _counts(VerifyOptions(), verifier) == (5, 5, 1)
    assert _counts(VerifyOptions(num_correct_trials=2, num_perf_trials=3, num_warmup=2), verifier) == (2, 3, 2)
