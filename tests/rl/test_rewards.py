"""Kernel reward formulas against hand-computed values (spec section 4.2)."""

import math

import pytest

from drkernel.config.base import ConfigError, load_config
from drkernel.rl.rewards import RewardConfig, kernel_reward, score
from drkernel.types.verify_result import VerifyResult


@pytest.mark.parametrize(
    ("speedup", "coverage", "expected"),
    [
        (2.0, 0.5, 0.5 + 0.5 * 2.0 + 0.5 * 0.5),  # 1.75
        (5.0, 1.0, 0.5 + 0.5 * 3.0 + 0.5 * 1.0),  # cap at 3: the maximum 2.5
        (0.5, 0.0, 0.5 + 0.25),  # slowdowns still earn, lower bound 0 in the recipe
        (None, None, 0.5),  # unmeasured speedup/coverage add nothing
        (float("nan"), float("inf"), 0.5),
        (-1.0, 1.7, 0.5 + 0.5),  # negative speedup -> 0, coverage clamped to 1
    ],
)
def test_recipe_reward_for_correct_honest_kernels(speedup, coverage, expected):
    assert kernel_reward(True, None, speedup, coverage) == pytest.approx(expected)


def test_incorrect_or_hacked_kernels_earn_zero_even_with_coverage():
    assert kernel_reward(False, None, 2.0, 1.0) == 0.0
    assert kernel_reward(True, "decoy_kernel", 3.0, 1.0) == 0.0
    assert kernel_reward(False, None, 0.0, 0.0, compiled=False) == 0.0


def test_lower_bound_zeroes_slow_speedups():
    cfg = RewardConfig(speedup_lower_bound=1.0)
    assert kernel_reward(True, None, 0.9, 0.0, cfg) == pytest.approx(0.5)
    assert kernel_reward(True, None, 1.2, 0.0, cfg) == pytest.approx(0.5 + 0.6)


def test_weights_are_configurable():
    cfg = RewardConfig(correct_weight=1.0, speedup_weight=0.0, coverage_weight=0.25, speedup_cap=2.0)
    assert kernel_reward(True, None, 10.0, 0.8, cfg) == pytest.approx(1.0 + 0.2)


def test_weighted_reward_is_a_step_at_one_plus_eps():
    cfg = RewardConfig(kind="weighted")
    assert kernel_reward(True, None, 1.005, 0.0, cfg) == pytest.approx(0.5)
    assert kernel_reward(True, None, 1.01, 0.4, cfg) == pytest.approx(0.5 + 0.5 + 0.2)
    assert kernel_reward(False, None, 2.0, 1.0, cfg) == 0.0


@pytest.mark.parametrize(
    ("compiled", "correct", "hack", "speedup", "expected"),
    [
        (True, True, "decoy_kernel", 5.0, -1.0),
        (False, False, None, 0.0, -0.5),
        (True, False, None, 0.0, -0.3),
        (True, True, None, 0.99, -0.1),
        (True, True, None, 1.0, 0.2),
        (True, True, None, 1.2, 0.4),
        (True, True, None, 1.5, 0.6),
        (True, True, None, 2.0, 0.8),
        (True, True, None, 3.0, 1.0),
        (True, True, None, 30.0, 1.0),
    ],
)
def test_tiered_reward_ladder(compiled, correct, hack, speedup, expected):
    cfg = RewardConfig(kind="tiered")
    assert kernel_reward(correct, hack, speedup, 0.5, cfg, compiled=compiled) == pytest.approx(expected)


def test_rewards_are_finite_for_any_measurement():
    for s in (None, float("nan"), float("inf"), -5.0, 0.0, 1e9):
        for c in (None, float("nan"), -1.0, 0.3, 2.0):
            assert math.isfinite(kernel_reward(True, None, s, c))


def test_reward_config_rejects_unknown_keys_and_bad_values(tmp_path):
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(RewardConfig, overrides=["init_correct_weight=0.5"])
    with pytest.raises(ConfigError):
        load_config(RewardConfig, overrides=["speedup_cap=0"])
    with pytest.raises(ConfigError):
        load_config(RewardConfig, overrides=["kind=like_kernel"])


def test_score_prices_a_verdict_under_the_callers_config():
    verdict = VerifyResult(compiled=True, correct=True, speedup=2.0, coverage=1.0)
    assert score(verdict) == pytest.approx(0.5 + 0.5 * 2.0 + 0.5)
    assert score(verdict, RewardConfig(speedup_cap=1.5)) == pytest.approx(0.5 + 0.5 * 1.5 + 0.5)
    assert score(verdict, RewardConfig(kind="tiered")) == pytest.approx(0.8)
    assert score(verdict.model_copy(update={"hack": "decoy_kernel"})) == 0.0
    infra = VerifyResult(status="infra_error", compiled=True, correct=True, speedup=2.0, coverage=1.0)
    assert score(infra) == 0.0
