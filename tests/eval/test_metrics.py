"""The evaluation's numbers on samples whose every value was worked out by hand (see each comment)."""

from __future__ import annotations

import itertools
import math

import pytest

from drkernel.eval.metrics import SampleRecord, TurnOutcome, summarize, unbiased_at_k


def ok(speedup: float | None, reward: float, correct: bool = True, hack: str | None = None) -> TurnOutcome:
    return TurnOutcome(status="ok", compiled=True, correct=correct, hack=hack, speedup=speedup, reward=reward)


FORMAT = TurnOutcome(status="format")
INFRA = TurnOutcome(status="infra_error")


def records() -> list[SampleRecord]:
    return [
        # task A: exactly 1.2x then 1.5x; a flagged 5x kernel then no code; a sample that timed out before any turn
        SampleRecord("A", 0, [ok(1.2, 1.0), ok(1.5, 1.5)]),
        SampleRecord("A", 1, [ok(5.0, 0.0, hack="result_caching"), FORMAT]),
        SampleRecord("A", 2, [], error="timeout: round 1 took longer than 60 s"),
        # task B: no verdict (infra); correct without a timing then wrong; exactly 3.0x
        SampleRecord("B", 0, [INFRA]),
        SampleRecord("B", 1, [ok(None, 0.6), ok(0.5, 0.0, correct=False)]),
        SampleRecord("B", 2, [ok(3.0, 2.0)]),
    ]


def test_fast_at_p_counts_every_sample_and_uses_strictly_greater():
    s = summarize(records(), ks=(1, 2))
    assert s["samples"] == 6 and s["tasks"] == 2 and s["samples_errored"] == 1
    # best over all turns: A0 (1.5x), B1 (correct, no timing), B2 (3.0x) are correct and unflagged
    assert s["best"]["fast@0"] == pytest.approx(3 / 6)
    assert s["best"]["fast@1"] == pytest.approx(2 / 6)  # B1 has no speedup: correct but not faster
    assert s["best"]["fast@1.2"] == pytest.approx(2 / 6)
    assert s["best"]["fast@1.5"] == pytest.approx(1 / 6)  # A0's 1.5x is not > 1.5
    assert s["best"]["fast@3"] == 0.0  # B2's 3.0x is not > 3
    # turn 1 alone: A0's exactly 1.2x does not count at p = 1.2 (it would with >=)
    assert s["per_turn"][0]["fast@1.2"] == pytest.approx(1 / 6)
    assert s["best_by_turn"][0]["fast@1.2"] == pytest.approx(1 / 6)
    assert s["best_by_turn"][1]["fast@1.2"] == pytest.approx(2 / 6)
    # turn 2 alone: only A0's second turn is correct (A1 wrote no code, B1's is wrong, the rest have no turn 2)
    assert s["per_turn"][1]["fast@0"] == pytest.approx(1 / 6)
    assert s["max_turns"] == 2


def test_rates_count_errors_and_flags_as_failures():
    s = summarize(records())
    # 8 turns plus one slot for the sample that errored before any turn
    assert s["turns_scored"] == 9 and s["turns_infra_error"] == 1
    assert s["format_rate"] == pytest.approx(7 / 9)
    assert s["compile_rate"] == pytest.approx(6 / 9)
    assert s["correct_rate"] == pytest.approx(4 / 9)  # the flagged kernel is not correct
    assert s["hack_rate"] == pytest.approx(1 / 9)
    assert s["hack_rate_by_category"] == {"result_caching": pytest.approx(1 / 9)}
    assert s["reward_mean"] == pytest.approx((1.0 + 1.5 + 0.0 + 0.6 + 0.0 + 2.0) / 9)


def test_pass_and_fast_at_k_use_the_unbiased_estimator_per_task():
    s = summarize(records(), ks=(1, 2))
    # A: n=3, c=1; B: n=3, c=2 (correct on some turn)
    assert s["at_k"]["pass@1"] == pytest.approx((1 / 3 + 2 / 3) / 2)
    assert s["at_k"]["pass@2"] == pytest.approx((1 - 1 / 3 + 1.0) / 2)  # A: 1 - C(2,2)/C(3,2); B: n-c < k
    assert s["at_k"]["fast_1.2@2"] == pytest.approx(2 / 3)  # one success of three in each task
    assert s["at_k"]["fast_3@1"] == 0.0
    assert "pass@4" not in summarize(records(), ks=(4,))["at_k"]  # three samples cannot score k = 4


@pytest.mark.parametrize(("n", "c", "k"), [(5, 2, 2), (6, 0, 3), (6, 6, 1), (7, 3, 4), (4, 1, 4)])
def test_unbiased_estimator_equals_counting_subsets(n, c, k):
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    expected = sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)
    assert math.isclose(unbiased_at_k(n, c, k), expected)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="exceeds"):
        unbiased_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="appears twice"):
        summarize([SampleRecord("A", 0), SampleRecord("A", 0)])
    with pytest.raises(ValueError, match="no samples"):
        summarize([])


def test_records_round_trip_through_json():
    for r in records():
        assert SampleRecord.from_json(r.to_json()) == r
