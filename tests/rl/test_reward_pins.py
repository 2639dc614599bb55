"""Pins on the reward path from timings to loss mask, each guarding a bug that once passed every other test.

The verdicts are built the way the judge builds them (drkernel.verify.verdict.Verdict: measured times
in, typed VerifyResult out) and priced by drkernel.rl.rewards.score, so the speedup's direction, the
coverage term and the lower bound are checked end to end, not on hand-made speedup values.
"""

from __future__ import annotations

import math

import pytest
import torch
from trajectory_factory import TurnSpec, make_trajectory

from drkernel.config.algorithm import AlgorithmConfig, PRSConfig
from drkernel.rl.filters import GroupVarianceFilter
from drkernel.rl.prs import prs_generator, prs_keep_mask, prs_keep_probability
from drkernel.rl.rewards import RewardConfig, kernel_reward, score
from drkernel.rl.step_batch import StepBatch, build_step_batch
from drkernel.types.verify_result import VerifyResult
from drkernel.verify.verdict import Verdict


def verdict(cand_ms: float, ref_ms: float, coverage: float | None = 1.0) -> VerifyResult:
    """A correct, honest, timed verdict as the judge finishes it."""
    v = Verdict(
        device="cpu", compiled=True, loaded=True, correct=True, cand_ms=cand_ms, ref_ms=ref_ms, coverage=coverage
    )
    return v.result(0.0)


def test_a_faster_kernel_earns_more():
    fast, slow = verdict(cand_ms=2.0, ref_ms=4.0), verdict(cand_ms=4.0, ref_ms=2.0)
    assert fast.speedup == pytest.approx(2.0) and slow.speedup == pytest.approx(0.5)
    assert score(fast) == pytest.approx(0.5 + 0.5 * 2.0 + 0.5 * 1.0)
    assert score(slow) == pytest.approx(0.5 + 0.5 * 0.5 + 0.5 * 1.0)


def test_coverage_is_part_of_the_reward():
    lazy, full = verdict(2.0, 2.0, coverage=0.1), verdict(2.0, 2.0, coverage=0.9)
    assert lazy.coverage == pytest.approx(0.1) and full.coverage == pytest.approx(0.9)
    assert score(full) - score(lazy) == pytest.approx(0.5 * 0.8)
    assert score(full, RewardConfig(coverage_weight=0.25)) == pytest.approx(0.5 + 0.5 + 0.25 * 0.9)
    assert score(full, RewardConfig(kind="weighted")) == pytest.approx(0.5 + 0.0 + 0.5 * 0.9)


def test_lower_bound_is_strict():
    """s~ = 0 only when s~ < L (spec 4.2): a speedup exactly at the bound keeps its credit."""
    cfg = RewardConfig(speedup_lower_bound=1.0)
    assert score(verdict(2.0, 2.0, coverage=0.0), cfg) == pytest.approx(0.5 + 0.5 * 1.0)
    assert score(verdict(2.0, 1.999, coverage=0.0), cfg) == pytest.approx(0.5)
    # the cap is a min: exactly at the cap and above it earn the same
    capped = RewardConfig(speedup_cap=2.0)
    assert kernel_reward(True, None, 2.0, 0.0, capped) == kernel_reward(True, None, 7.0, 0.0, capped) == 1.5


def test_unmeasurable_numbers_earn_nothing():
    """NaN or Inf from a broken timer or profiler adds nothing (never the cap): 0.5 for correctness only."""
    for s, c in ((math.inf, math.nan), (math.nan, math.nan), (math.inf, None), (None, math.inf)):
        assert kernel_reward(True, None, s, c) == pytest.approx(0.5)
    assert kernel_reward(True, None, 2.0, math.nan) == pytest.approx(1.5)
    assert kernel_reward(True, None, math.nan, 0.4) == pytest.approx(0.7)


def test_geometric_prs_ignores_uncounted_turns():
    """Counted correct turns 0.25 and 0.64 (geometric mean 0.4: keep); an uncounted correct turn of
    coverage 0 (not meaningful, or masked) must not drag the mean to 0 and reject the trajectory."""
    cov = torch.tensor([[0.25, 0.64, 0.0], [0.25, 0.64, 0.0]])
    correct = torch.ones(2, 3, dtype=torch.bool)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    cfg = PRSConfig(mode="geometric")
    for seed in range(4):
        keep = prs_keep_mask(cov, correct, mask, cfg, prs_generator(seed))
        assert keep[0].tolist() == [True, True, True]
        assert keep[1].tolist() == [False, False, False]  # the same turn counted: mean 0, all rejected


def test_prs_nan_coverage_and_speedup_never_keep_by_accident():
    """NaN coverage counts as 0 (rejected, hard rule or linear); a NaN speedup opens no speed escape."""
    cov = torch.tensor([math.nan, math.nan, 0.5])
    correct = torch.ones(3, dtype=torch.bool)
    speedup = torch.tensor([math.nan, 5.0, math.nan])
    for factor in (0.1, None):
        p = prs_keep_probability(cov, correct, factor=factor, speedup=speedup, speedup_threshold=2.0)
        assert p.tolist() == [0.0, 1.0, 1.0]
    p = prs_keep_probability(cov, correct, threshold=0.6, factor=None, speedup=speedup, speedup_threshold=2.0)
    assert p.tolist() == [0.0, 1.0, 0.0]


def _build(trajs: list) -> StepBatch:
    cfg = AlgorithmConfig.model_validate({"prs": {"factor": None}})
    filt = GroupVarianceFilter(cfg.filter, target_groups=1, group_size=len(trajs))
    return build_step_batch(trajs, cfg, 0, filt, prs_generator(0))


def test_step_batch_refuses_a_nan_reward_and_zeroes_nan_measurements():
    """A NaN reward on a scored turn is a bug upstream: refused, naming the trajectory. NaN coverage in a
    verdict is read as 0, so PRS (hard rule) rejects that correct turn rather than keeping it."""
    good = dict(correct=True, reward=1.5, speedup=1.0, coverage=0.9)
    bad = [
        make_trajectory("g", 0, [TurnSpec(**good)]),
        make_trajectory("g", 1, [TurnSpec(**{**good, "reward": math.nan})]),
    ]
    with pytest.raises(ValueError, match="g/1 turn 0"):
        _build(bad)
    trajs = [
        make_trajectory("g", 0, [TurnSpec(**{**good, "reward": 1.0, "coverage": math.nan})]),
        make_trajectory("g", 1, [TurnSpec(**good)]),
        make_trajectory("g", 2, [TurnSpec()]),
    ]
    assert _build(trajs).prs_keep[:, 0].tolist() == [False, True, True]


def test_tiered_reward_reads_compiled_from_the_verdict():
    """A kernel that did not compile is -0.5 under the ladder, not -0.3; a direct call defaults to compiled."""
    tiered = RewardConfig(kind="tiered")
    assert score(VerifyResult(compiled=False, correct=False), tiered) == -0.5
    assert score(VerifyResult(compiled=True, correct=False), tiered) == -0.3
    assert kernel_reward(True, None, 2.0, 0.5, tiered) == pytest.approx(0.8)


def test_a_cap_below_one_is_a_valid_setting():
    cfg = RewardConfig(speedup_cap=0.5)
    assert kernel_reward(True, None, 2.0, 0.0, cfg) == pytest.approx(0.5 + 0.25)


def test_geometric_prs_with_one_counted_turn_uses_its_coverage():
    """One counted correct turn of coverage 0.25 (its own geometric mean) is below theta: rejected."""
    cov = torch.tensor([[0.25, 0.0]])
    keep = prs_keep_mask(
        cov, torch.tensor([[True, False]]), torch.tensor([[True, False]]), PRSConfig(mode="geometric"), prs_generator(0)
    )
    assert keep.tolist() == [[False, True]]


def test_prs_speed_escape_through_the_config_in_both_modes():
    """Coverage 0 but speedup at the threshold (>=) escapes PRS; a NaN speedup never does, even at threshold 1."""
    cov = torch.zeros(3, 1)
    correct = torch.ones(3, 1, dtype=torch.bool)
    speedup = torch.tensor([[2.0], [1.99], [math.nan]])
    for mode in ("turn", "geometric"):
        cfg = PRSConfig(mode=mode, speedup_threshold=2.0)
        keep = prs_keep_mask(cov, correct, correct, cfg, prs_generator(0), speedup=speedup)
        assert keep[:, 0].tolist() == [True, False, False]
    p = prs_keep_probability(cov[:, 0], correct[:, 0], speedup=speedup[:, 0], speedup_threshold=1.0)
    assert p.tolist() == [1.0, 1.0, 0.0]


def test_geometric_prs_reads_nan_as_zero_and_caps_coverage_at_one():
    correct = torch.ones(2, 2, dtype=torch.bool)
    cov = torch.tensor([[math.nan, 1.0], [1.5, 0.1]])  # row 1: sqrt(1 * 0.1) = 0.316 -> p = 0.16, not sqrt(0.15)
    gen = prs_generator(0)
    kept = (
        torch.stack([prs_keep_mask(cov, correct, correct, PRSConfig(mode="geometric"), gen)[:, 0] for _ in range(400)])
        .double()
        .mean(0)
    )
    assert kept[0] == 0.0
    assert abs(kept[1].item() - (math.sqrt(0.1) - 0.3) / 0.1) < 0.08


def test_prs_keep_probability_keeps_float64_exact_at_theta():
    """Coverage exactly theta in float64 gives p = 0, not a float32 rounding's 1e-7."""
    p = prs_keep_probability(torch.tensor([0.3], dtype=torch.float64), torch.tensor([True]))
    assert p.item() == 0.0 and p.dtype == torch.float64


def test_prs_mask_is_bool_seeded_and_its_errors_show_the_shapes():
    cov = torch.full((64, 2), 0.35)  # p = 0.5 per trajectory in geometric mode
    mask = torch.ones(64, 2, dtype=torch.int64)
    off = prs_keep_mask(cov, mask, mask, PRSConfig(enabled=False), prs_generator(0))
    assert off.dtype == torch.bool and off.all()
    geo = PRSConfig(mode="geometric")
    a, b = (prs_keep_mask(cov, mask, mask.bool(), geo, prs_generator(9)) for _ in range(2))
    assert torch.equal(a, b) and not torch.equal(a, prs_keep_mask(cov, mask, mask.bool(), geo, prs_generator(10)))
    with pytest.raises(ValueError, match=r"\[N, T\]: \(64, 2\), \(64,\)"):
        prs_keep_mask(cov, mask, mask[:, 0], PRSConfig(), prs_generator(0))
