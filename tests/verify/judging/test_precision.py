"""The rule that ends timing: the median per-round ratio's 95 % order-statistic interval, within a precision."""

import pytest

from drkernel.verify.judging.precision import enough_rounds, median_interval, relative_half_width


def test_interval_ranks_follow_the_binomial_approximation():
    assert median_interval([float(x) for x in range(1, 11)]) == (1.0, 10.0)  # n = 10: the whole range
    assert median_interval([float(x) for x in range(30, 0, -1)]) == (9.0, 22.0)  # n = 30: ranks 9 and 22, any order
    assert median_interval([2.0]) == (2.0, 2.0)


def test_half_width_is_the_larger_side_over_the_median():
    ratios = [1.0] * 8 + [0.9, 1.05]
    assert relative_half_width(ratios) == pytest.approx(0.1)
    assert relative_half_width([0.0, 0.0, 0.0]) == float("inf")


def test_timing_ends_early_only_when_precise_and_past_the_minimum():
    steady = [1.0, 1.002, 0.999] * 5
    assert not enough_rounds(steady[:9], 0.01, 10, 30)
    assert enough_rounds(steady[:10], 0.01, 10, 30)
    noisy = [1.0, 1.1] * 10
    assert not enough_rounds(noisy, 0.01, 10, 30)
    assert enough_rounds(noisy + [1.0] * 10, 0.01, 10, 30)  # the 30th round ends it whatever the spread


def test_precision_zero_times_every_round_and_max_below_min_ends_at_max():
    steady = [1.0] * 30
    assert not enough_rounds(steady[:29], 0.0, 10, 30)
    assert enough_rounds(steady, 0.0, 10, 30)
    assert enough_rounds(steady[:5], 0.01, 10, 5)
    assert not enough_rounds(steady[:4], 0.01, 10, 5)


def test_a_spent_budget_settles_for_three_times_the_precision():
    fair = [1.0, 1.04] * 10  # a half-width near 2 %: not within 1 %, within 3 %
    noisy = [1.0, 1.1] * 10
    assert not enough_rounds(fair[:9], 0.01, 10, 30, spent_s=5.0, budget_s=0.25)
    assert not enough_rounds(fair[:10], 0.01, 10, 30, spent_s=0.24, budget_s=0.25)
    assert enough_rounds(fair[:10], 0.01, 10, 30, spent_s=0.25, budget_s=0.25)
    assert not enough_rounds(noisy[:10], 0.01, 10, 30, spent_s=9.0, budget_s=0.25)
    assert not enough_rounds(fair[:10], 0.01, 10, 30, spent_s=9.0, budget_s=0.0)
    assert not enough_rounds(fair[:10], 0.0, 10, 30, spent_s=9.0, budget_s=0.25)
