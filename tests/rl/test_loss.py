"""Policy loss: hand values, an independent re-derivation, verl itself, and gradient masking."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla, kl_penalty

from drkernel.config.algorithm import LossConfig
from drkernel.rl.loss import policy_loss, verl_actor_config

CFG = LossConfig()


def _reference_loss(logp, old, adv, mask, eps_low=0.2, eps_high=0.28, c=3.0, scale=1000.0, w=None):
    """The section 3.4 formula written out independently of verl."""
    ratio = torch.exp((logp - old).clamp(-20, 20))
    clipped = torch.maximum(-adv * ratio, -adv * ratio.clamp(1 - eps_low, 1 + eps_high))
    per_token = torch.where(adv < 0, torch.minimum(clipped, -adv * c), clipped)
    if w is not None:
        per_token = per_token * w
    return _seq_mean_token_sum(per_token, mask, scale)


def _seq_mean_token_sum(per_token, mask, scale):
    row_sums = (per_token * mask).sum(-1)
    rows = (mask.sum(-1) > 0).sum().clamp(min=1)
    return row_sums.sum() / rows / scale


def test_per_token_clipping_by_hand():
    # one token per row so the aggregated loss is mean(row losses) / 1000
    ratio = torch.tensor([1.5, 0.5, 5.0, 0.5, 1.1])
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0, -2.0])
    expected = torch.tensor([-1.28, -0.5, 3.0, 0.8, 2.2])  # clip-high, unclipped, dual-clip, clip-low, plain
    logp = ratio.log()[:, None]
    loss, m = policy_loss(logp, torch.zeros_like(logp), adv[:, None], torch.ones_like(logp), CFG)
    assert loss.item() == pytest.approx(expected.mean().item() / 1000, rel=1e-6)
    assert m["loss/clipfrac"] == pytest.approx(2 / 5)  # rows 0 and 3 hit the clip
    assert m["loss/clipfrac_dual"] == pytest.approx(1 / 5)  # row 2 hits the dual clip


def _random_batch(seed, n=5, t=3, length=7):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(n, t, length, generator=g) * 3
    logp = old + 0.6 * torch.randn(n, t, length, generator=g)
    adv = torch.randn(n, t, 1, generator=g).expand(n, t, length).contiguous()
    mask = torch.rand(n, t, length, generator=g) < 0.7
    mask[0, 1] = False  # a fully masked turn
    return logp, old, adv, mask


def test_matches_the_independent_formula_and_verl():
    logp, old, adv, mask = _random_batch(0)
    loss, _ = policy_loss(logp, old, adv, mask, CFG)
    ref = _reference_loss(logp, old, adv, mask.float())
    assert loss.item() == pytest.approx(ref.item(), rel=1e-5)
    rows = lambda x: x.reshape(-1, x.shape[-1])  # noqa: E731
    verl_cfg = verl_actor_config(CFG, {"loss_scale_factor": 1000})
    verl_loss, _ = compute_policy_loss_vanilla(
        rows(old), rows(logp), rows(adv), rows(mask).float(), "seq-mean-token-sum-norm", verl_cfg
    )
    assert loss.item() == pytest.approx(verl_loss.item(), rel=1e-6)


def test_tis_weights_and_kl_term():
    logp, old, adv, mask = _random_batch(1)
    w = torch.rand(logp.shape, generator=torch.Generator().manual_seed(2)) * 2
    loss, _ = policy_loss(logp, old, adv, mask, CFG, rollout_is_weights=w)
    assert loss.item() == pytest.approx(_reference_loss(logp, old, adv, mask.float(), w=w).item(), rel=1e-5)
    ref_lp = old - 0.1
    cfg = LossConfig(kl_coef=0.5)
    with_kl, m = policy_loss(logp, old, adv, mask, cfg, ref_log_prob=ref_lp)
    kl = kl_penalty(logp, ref_lp, "low_var_kl")
    kl_agg = _seq_mean_token_sum(kl, mask.float(), 1000.0)
    base, _ = policy_loss(logp, old, adv, mask, CFG)
    assert with_kl.item() == pytest.approx(base.item() + 0.5 * kl_agg.item(), rel=1e-5)
    assert m["loss/kl_loss"] == pytest.approx(kl_agg.item(), rel=1e-5)
    with pytest.raises(ValueError, match="ref_log_prob"):
        policy_loss(logp, old, adv, mask, cfg)


def test_other_aggregations_and_scale():
    logp, old, adv, mask = _random_batch(3)
    plain, _ = policy_loss(logp, old, adv, mask, LossConfig(loss_agg_mode="seq-mean-token-sum"))
    normed, _ = policy_loss(logp, old, adv, mask, LossConfig(loss_scale_factor=10))
    assert normed.item() == pytest.approx(plain.item() / 10, rel=1e-6)
    tm, _ = policy_loss(logp, old, adv, mask, LossConfig(loss_agg_mode="token-mean"))
    per_token = _reference_loss(logp, old, adv, mask.float(), scale=1.0)  # seq-mean
    assert tm.item() != pytest.approx(per_token.item())  # the modes genuinely differ


def test_all_masked_is_zero_and_nan_free():
    logp, old, adv, mask = _random_batch(4)
    logp = logp.clone().requires_grad_()
    mask[0, 0, 0] = False
    old[0, 0, 0] = float("-inf")  # padding garbage
    loss, m = policy_loss(logp, old, adv, torch.zeros_like(mask), CFG, rollout_log_prob=old, unrejected_mask=mask)
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(logp.grad, torch.zeros_like(logp))
    assert all(math.isfinite(v) for v in m.values())
    assert m["rejected/token_rejected_fraction"] == 1.0


def test_metrics_report_rejections_and_mismatch():
    logp, old, adv, mask = _random_batch(5)
    kept = mask.clone()
    kept[1] = False
    rollout = old - 0.01
    _, m = policy_loss(logp, old, adv, kept, CFG, rollout_log_prob=rollout, unrejected_mask=mask)
    assert m["rejected/trajectory_rejected_fraction"] == pytest.approx(1 / 5)
    assert m["mismatch/kl"] == pytest.approx(-0.01, abs=1e-6)
    with pytest.raises(ValueError, match="shape"):
        policy_loss(logp, old[:, :1], adv, mask, CFG)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["seq-mean-token-sum-norm", "token-mean", "seq-mean-token-mean"]))
def test_masked_tokens_get_exactly_zero_gradient(seed, mode):
    g = torch.Generator().manual_seed(seed)
    rows, length, vocab = 6, 5, 11
    logits = torch.randn(rows, length, vocab, generator=g).requires_grad_()
    tokens = torch.randint(vocab, (rows, length), generator=g)
    logp = torch.log_softmax(logits, -1).gather(-1, tokens[..., None])[..., 0]
    old = logp.detach() + 0.3 * torch.randn(rows, length, generator=g)
    adv = torch.randn(rows, 1, generator=g).expand(rows, length)
    mask = torch.rand(rows, length, generator=g) < 0.5
    w = torch.rand(rows, length, generator=g) * 2
    loss, _ = policy_loss(logp, old, adv, mask, LossConfig(loss_agg_mode=mode), rollout_is_weights=w)
    loss.backward()
    assert torch.isfinite(logits.grad).all()
    assert torch.equal(logits.grad[~mask], torch.zeros_like(logits.grad[~mask]))
    if mask.any():
        assert logits.grad[mask].abs().sum() > 0


def test_micro_batches_with_global_counts_sum_to_the_full_loss():
    logp, old, adv, mask = _random_batch(6)
    full, _ = policy_loss(logp, old, adv, mask, CFG)
    rows_with_tokens = int((mask.sum(-1) > 0).sum())
    parts = [
        policy_loss(logp[s], old[s], adv[s], mask[s], CFG, global_batch_size=rows_with_tokens)[0]
        for s in (slice(0, 2), slice(2, None))
    ]
    assert (parts[0] + parts[1]).item() == pytest.approx(full.item(), rel=1e-6)
