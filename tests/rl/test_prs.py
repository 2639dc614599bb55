"""PRS keep probability, sampler and modes against hand values and a closed-form rate."""

import math

import pytest
import torch

from drkernel.config.algorithm import PRSConfig
from drkernel.rl.prs import prs_generator, prs_keep_mask, prs_keep_probability

COV = torch.tensor([0.0, 0.2, 0.3, 0.35, 0.4, 0.9, float("nan")])


def test_keep_probability_by_hand():
    p = prs_keep_probability(COV, torch.ones(7, dtype=torch.bool))
    assert torch.allclose(p, torch.tensor([0, 0, 0, 0.5, 1, 1, 0]))
    # incorrect kernels are never rejected by PRS
    assert torch.equal(prs_keep_probability(COV, torch.zeros(7, dtype=torch.bool)), torch.ones(7))


def test_hard_rule_and_speed_escape():
    correct = torch.ones(7, dtype=torch.bool)
    for f in (0.0, None):
        assert prs_keep_probability(COV, correct, factor=f).tolist() == [0, 0, 1, 1, 1, 1, 0]
    speedup = torch.tensor([3.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.5])
    p = prs_keep_probability(COV, correct, speedup=speedup, speedup_threshold=2.0)
    assert torch.allclose(p, torch.tensor([1, 0, 0, 0.5, 1, 1, 1]))
    with pytest.raises(ValueError, match="speedup"):
        prs_keep_probability(COV, correct, speedup_threshold=2.0)
    with pytest.raises(ValueError, match="shape"):
        prs_keep_probability(COV, correct[:3])


def test_turn_mode_rate_matches_closed_form_for_uniform_coverage():
    """c ~ U(0, 1): P(keep) = P(c >= 0.4) + integral_{0.3}^{0.4} (c - 0.3)/0.1 dc = 0.6 + 0.05."""
    n, t = 20_000, 3
    gen = torch.Generator().manual_seed(3)
    cov = torch.rand(n, t, generator=gen, dtype=torch.float64)
    correct = torch.rand(n, t, generator=gen) < 0.5
    keep = prs_keep_mask(cov, correct, torch.ones(n, t, dtype=torch.bool), PRSConfig(), prs_generator(0))
    assert keep[~correct].all()
    rate = keep[correct].double().mean().item()
    units = int(correct.sum())
    assert abs(rate - 0.65) < 5 * math.sqrt(0.65 * 0.35 / units)


def test_sampler_is_seeded():
    cov = torch.full((50, 3), 0.35)
    correct = torch.ones(50, 3, dtype=torch.bool)
    mask = torch.ones(50, 3, dtype=torch.bool)
    a = prs_keep_mask(cov, correct, mask, PRSConfig(), prs_generator(5))
    b = prs_keep_mask(cov, correct, mask, PRSConfig(), prs_generator(5))
    c = prs_keep_mask(cov, correct, mask, PRSConfig(), prs_generator(6))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_geometric_mode_by_hand():
    cov = torch.tensor([[0.25, 0.64, 0.0], [0.09, 1.0, 0.9], [0.1, 0.2, 0.0]])
    correct = torch.tensor([[1, 1, 0], [1, 1, 0], [0, 0, 0]], dtype=torch.bool)
    mask = torch.tensor([[1, 1, 1], [1, 1, 1], [1, 1, 0]], dtype=torch.bool)
    cfg = PRSConfig(mode="geometric")
    for seed in range(5):
        keep = prs_keep_mask(cov, correct, mask, cfg, prs_generator(seed))
        # traj 0: sqrt(0.25 * 0.64) = 0.4 -> p = 1; traj 1: sqrt(0.09 * 1) = 0.3 -> p = 0 on its
        # correct turns, its incorrect turn kept; traj 2: no correct turns -> nothing rejected
        assert keep.tolist() == [[True, True, True], [False, False, True], [True, True, True]]


def test_geometric_mode_draws_once_per_trajectory():
    cov = torch.full((4000, 3), 0.35)  # geometric mean 0.35 -> p = 0.5
    correct = torch.ones(4000, 3, dtype=torch.bool)
    keep = prs_keep_mask(cov, correct, correct, PRSConfig(mode="geometric"), prs_generator(1))
    assert (keep.all(1) | ~keep.any(1)).all()  # all-or-nothing per trajectory
    assert abs(keep[:, 0].double().mean().item() - 0.5) < 5 * math.sqrt(0.25 / 4000)


def test_disabled_and_uncounted_turns_are_kept():
    cov = torch.zeros(2, 2)
    correct = torch.ones(2, 2, dtype=torch.bool)
    mask = torch.tensor([[1, 0], [0, 0]], dtype=torch.bool)
    assert prs_keep_mask(cov, correct, mask, PRSConfig(enabled=False), prs_generator(0)).all()
    assert prs_keep_mask(cov, correct, mask, PRSConfig(), prs_generator(0)).tolist() == [[False, True], [True, True]]
    with pytest.raises(ValueError, match=r"\[N, T\]"):
        prs_keep_mask(cov[0], correct[0], mask[0], PRSConfig(), prs_generator(0))
