"""The job's `val/` metrics are the evaluation's summary, flattened under names the metric sinks take."""

from __future__ import annotations

import pytest

from drkernel.eval.metrics import SampleRecord, TurnOutcome, summarize
from drkernel.eval.validation import flat_metrics


def test_flat_metrics_carry_best_per_turn_rates_and_pass_at_1():
    correct = TurnOutcome(status="ok", compiled=True, correct=True, speedup=1.5, reward=1.5)
    wrong = TurnOutcome(status="ok", compiled=True, correct=False, speedup=None, reward=0.0)
    records = [SampleRecord("a", 0, [wrong, correct]), SampleRecord("a", 1, [wrong, wrong])]
    flat = flat_metrics(summarize(records))
    assert flat["val/fast@0"] == 0.5 and flat["val/fast@1.2"] == 0.5 and flat["val/fast@1.5"] == 0.0
    assert flat["val/fast@0/turn1"] == 0.0 and flat["val/fast@0/turn2"] == 0.5
    assert flat["val/correct_rate"] == pytest.approx(1 / 4) and flat["val/compile_rate"] == 1.0
    assert flat["val/pass@1"] == 0.5 and flat["val/samples_errored"] == 0.0
    assert all(isinstance(v, float) for v in flat.values())
