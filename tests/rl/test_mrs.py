"""Mismatch rejection (MRS), token veto and TIS against hand values and closed-form rates."""

import math

import pytest
import torch

from drkernel.config.algorithm import MRSConfig
from drkernel.rl.mrs import mismatch_metrics, mismatch_rejection, truncated_is_weights

LN = math.log


def _lp(deltas, mask=None):
    """rollout log-probs -1, train log-probs -1 + delta, [N, T, L]."""
    d = torch.tensor(deltas, dtype=torch.float64)
    rollout = torch.full_like(d, -1.0)
    m = torch.ones_like(d, dtype=torch.bool) if mask is None else torch.tensor(mask, dtype=torch.bool)
    return rollout + d, rollout, m


# one trajectory, two turns of three tokens
D = [[[LN(1.0004), LN(0.9995), LN(1.0)], [LN(1.003), LN(0.9985), LN(1.0)]]]


@pytest.mark.parametrize(
    ("mode", "turn_kept"),
    [
        # turn 1 tokens all in [0.999, 1.001]; turn 2 has 1.003 and 0.9985 outside
        ("token", [[3, 1]]),
        # turn sums: 1.0004*0.9995 ~ 0.99990 in; 1.003*0.9985 ~ 1.001495 out
        ("turn", [[3, 0]]),
        # turn geometric means: 0.99997 in; 1.0005 in
        ("turn_geo", [[3, 3]]),
        # trajectory product ~ 1.00140 out
        ("sequence", [[0, 0]]),
        # trajectory geometric mean ~ 1.000233 in
        ("geometric", [[3, 3]]),
    ],
)
def test_each_mode_by_hand(mode, turn_kept):
    train, rollout, mask = _lp(D)
    out = mismatch_rejection(train, rollout, mask, MRSConfig(mode=mode))
    assert out.response_mask.sum(-1).tolist() == turn_kept


def test_asymmetric_bounds_bound_the_train_over_rollout_ratio():
    # verl's k1 options bound the inverse ratio; we must keep exactly lower <= w <= upper
    cfg = MRSConfig(mode="token", lower=0.99, upper=1.05, veto_threshold=None)
    train, rollout, mask = _lp([[[LN(1.03), LN(1.045), LN(0.985), LN(1.06), LN(0.995)]]])
    keep = mismatch_rejection(train, rollout, mask, cfg).response_mask
    assert keep.tolist() == [[[True, True, False, False, True]]]
    assert MRSConfig(lower=None, upper=2.0).effective_lower == 0.5
    with pytest.raises(ValueError, match="exceeds"):
        MRSConfig(lower=1.1, upper=1.001)


def test_veto_masks_only_the_turn_holding_the_tiny_ratio():
    d = [[[0.0, 0.0, LN(5e-5)], [0.0, 0.0, 0.0]], [[0.0, LN(2e-4), 0.0], [0.0, 0.0, 0.0]]]
    train, rollout, mask = _lp(d)
    out = mismatch_rejection(train, rollout, mask, MRSConfig(mode=None))
    # 5e-5 < 1e-4 vetoes turn 1 of trajectory 0; 2e-4 is above the threshold and survives
    assert out.response_mask.any(-1).tolist() == [[False, True], [True, True]]
    assert out.metrics["mrs/veto_turn_fraction"] == pytest.approx(0.25)
    # the veto ignores padding: a tiny ratio on a masked token does nothing
    m = [[[1, 1, 0], [1, 1, 1]], [[1, 1, 1], [1, 1, 1]]]
    train, rollout, mask = _lp(d, m)
    out = mismatch_rejection(train, rollout, mask, MRSConfig(mode=None))
    assert torch.equal(out.response_mask, mask)


def test_padding_values_and_empty_masks_are_harmless():
    train, rollout, mask = _lp([[[0.0, 0.0], [0.0, 0.0]]], [[[1, 0], [0, 0]]])
    rollout[0, 0, 1] = float("-inf")  # padding from the engine
    train[0, 1] = float("nan")
    out = mismatch_rejection(train, rollout, mask, MRSConfig())
    assert out.response_mask.tolist() == [[[True, False], [False, False]]]
    empty = mismatch_rejection(train, rollout, torch.zeros_like(mask), MRSConfig())
    assert not empty.response_mask.any()
    assert all(math.isfinite(v) for v in empty.metrics.values())
    w, _ = truncated_is_weights(train, rollout, torch.zeros_like(mask), "token", 2.0)
    assert torch.equal(w, torch.zeros_like(w))


def test_shape_and_mode_errors():
    train, rollout, mask = _lp(D)
    with pytest.raises(ValueError, match="share a shape"):
        mismatch_rejection(train, rollout[:, :1], mask, MRSConfig())
    with pytest.raises(ValueError, match=r"\[N, T, L\]"):
        mismatch_rejection(train[0], rollout[0], mask[0], MRSConfig())
    with pytest.raises(ValueError, match="TIS mode"):
        truncated_is_weights(train, rollout, mask, "geometric", 2.0)


def test_truncated_is_weights_by_hand():
    d = [[[LN(1.5), LN(3.0)], [LN(0.5), LN(0.8)]]]
    train, rollout, mask = _lp(d, [[[1, 1], [1, 0]]])
    tok, _ = truncated_is_weights(train, rollout, mask, "token", 2.0)
    assert torch.allclose(tok, torch.tensor([[[1.5, 2.0], [0.5, 0.0]]], dtype=torch.float64))
    turn, _ = truncated_is_weights(train, rollout, mask, "turn", 2.0)
    assert torch.allclose(turn, torch.tensor([[[2.0, 2.0], [0.5, 0.0]]], dtype=torch.float64))
    seq, _ = truncated_is_weights(train, rollout, mask, "sequence", 10.0)
    assert torch.allclose(seq, torch.tensor([[[2.25, 2.25], [2.25, 0.0]]], dtype=torch.float64))
    assert not seq.requires_grad


def test_mismatch_kl_and_k3_by_hand():
    d = [[[0.1, -0.2], [0.3, 0.0]]]
    train, rollout, mask = _lp(d, [[[1, 1], [1, 0]]])
    m = mismatch_metrics(train, rollout, mask)
    deltas = torch.tensor([0.1, -0.2, 0.3], dtype=torch.float64)
    assert m["mismatch/kl"] == pytest.approx(float(-deltas.mean()), rel=1e-6)
    assert m["mismatch/k3_kl"] == pytest.approx(float((deltas.exp() - deltas - 1).mean()), rel=1e-6)
    assert mismatch_metrics(train, rollout, torch.zeros_like(mask)) == {}


def _phi(x):
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


@pytest.mark.parametrize(
    ("mode", "n_avg", "is_sum"),
    [
        ("token", 1, False),
        ("turn_geo", 16, False),
        ("turn", 16, True),
        ("geometric", 48, False),
        ("sequence", 48, True),
    ],
)
def test_keep_rates_match_the_gaussian_closed_form(mode, n_avg, is_sum):
    """delta ~ N(mu, s^2) iid: a mean of k deltas is N(mu, s^2/k), a sum is N(k mu, k s^2), so
    P(keep) = Phi((log u - m)/sd) - Phi((log l - m)/sd). Bounds are widened for the sum modes."""
    n, t, length = 6000, 3, 16
    mu, s = 2e-4, 4e-3
    lower, upper = (0.999, 1.001) if not is_sum else (0.99, 1.012)
    gen = torch.Generator().manual_seed(7)
    delta = mu + s * torch.randn(n, t, length, generator=gen, dtype=torch.float64)
    rollout = -torch.rand(n, t, length, generator=gen, dtype=torch.float64) - 0.5
    cfg = MRSConfig(mode=mode, lower=lower, upper=upper, veto_threshold=None)
    keep = mismatch_rejection(rollout + delta, rollout, torch.ones_like(delta, dtype=torch.bool), cfg).response_mask
    mean, sd = (n_avg * mu, math.sqrt(n_avg) * s) if is_sum else (mu, s / math.sqrt(n_avg))
    p = _phi((LN(upper) - mean) / sd) - _phi((LN(lower) - mean) / sd)
    units = keep.numel() // n_avg
    rate = keep.double().mean().item()
    assert 0.05 < p < 0.95  # a rate that can actually be told apart
    assert abs(rate - p) < 5 * math.sqrt(p * (1 - p) / units), (mode, rate, p)
