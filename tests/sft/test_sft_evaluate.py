"""Post-SFT evaluation: answers are extracted and judged by the real verifier; rates count them right."""

from __future__ import annotations

import pytest

from drkernel.config.verifier import VerifyOptions
from drkernel.sft.data import code_response
from drkernel.sft.evaluate import _rates, judge_answers
from drkernel.tasks import load_tasks
from drkernel.verify.engine import Verifier


@pytest.mark.integration
def test_judge_answers_with_the_real_verifier():
    relu = next(t for t in load_tasks() if t.name == "relu")
    good = code_response(relu.solutions["fused"])
    broken = code_response(relu.solutions["fused"].replace("def forward", "def forward(:", 1))
    answers = [(good, 100, True), ("no fenced code here", 5, True), (broken, 90, False)]
    options = VerifyOptions(device="cpu", num_correct_trials=2, num_perf_trials=1, num_warmup=0, measure_coverage=False)
    with Verifier(device="cpu", max_concurrency=2) as verifier:
        records = judge_answers([relu] * 3, answers, "greedy", verifier, options, concurrency=2)
    assert [r.has_code for r in records] == [True, False, True]
    assert records[0].compiled and records[0].correct and records[0].error_kind is None
    assert not records[1].compiled and records[1].error_kind == "no_code"
    assert not records[2].compiled and records[2].error_kind == "syntax" and not records[2].finished
    rates = _rates(records)
    assert rates["judged"] == 3 and rates["compile_rate"] == pytest.approx(1 / 3)
    assert rates["correct_rate"] == pytest.approx(1 / 3) and rates["has_code_rate"] == pytest.approx(2 / 3)
