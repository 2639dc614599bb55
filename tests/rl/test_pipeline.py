"""The pieces composed as the trainer uses them: rejected turns keep their baseline role."""

import torch

from drkernel.config.algorithm import AlgorithmConfig
from drkernel.rl.filters import GroupVarianceFilter, last_turn_rewards, meaningful_turn_mask
from drkernel.rl.loss import policy_loss
from drkernel.rl.mrs import mismatch_rejection
from drkernel.rl.prs import prs_generator, prs_keep_mask
from drkernel.rl.trloo import trloo_advantages, turn_advantages


def test_one_step_of_the_recipe_on_synthetic_data():
    cfg = AlgorithmConfig()
    n_groups, n, t, length = 3, 4, 3, 6
    g = torch.Generator().manual_seed(0)
    ids = [k for k in range(n_groups) for _ in range(n)]
    rows = n_groups * n
    correct = torch.rand(rows, t, generator=g) < 0.5
    coverage = torch.rand(rows, t, generator=g)
    rewards = torch.where(correct, 0.5 + 0.5 * torch.rand(rows, t, generator=g) * 3 + 0.5 * coverage, 0.0)
    exists = torch.ones(rows, t, dtype=torch.bool)
    exists[0, 2] = False  # infra error on one turn: masked, not rewarded
    turn_mask = meaningful_turn_mask(rewards, exists)

    tok_mask = turn_mask[..., None].expand(rows, t, length).clone()
    rollout = -torch.rand(rows, t, length, generator=g)
    train = rollout + 1e-5 * torch.randn(rows, t, length, generator=g)
    train[5] += 0.01  # trajectory 5 drifted: geometric MRS rejects all of its turns
    mrs = mismatch_rejection(train, rollout, tok_mask, cfg.mrs)
    prs = prs_keep_mask(coverage, correct, turn_mask, cfg.prs, prs_generator(cfg.prs.seed))
    loss_mask = mrs.response_mask & prs[..., None]
    assert not loss_mask[5].any() and loss_mask[6].any()

    filt = GroupVarianceFilter(cfg.filter, target_groups=2, group_size=n)
    last = last_turn_rewards(rewards, turn_mask)
    step = filt.step(list(range(n_groups)), [last[ids.index(k) : ids.index(k) + n] for k in range(n_groups)])
    assert not step.skipped

    adv = turn_advantages(cfg.trloo.estimator, rewards, turn_mask, ids, cfg.trloo.gamma)
    assert torch.equal(adv, trloo_advantages(rewards, turn_mask, ids))  # rejection did not touch the baselines
    keep_rows = torch.tensor([i in step.train for i in ids])
    logp = train.clone().requires_grad_()
    loss, metrics = policy_loss(
        logp[keep_rows],
        train[keep_rows],
        adv[keep_rows][..., None].expand(-1, t, length),
        loss_mask[keep_rows],
        cfg.loss,
        rollout_log_prob=rollout[keep_rows],
        unrejected_mask=tok_mask[keep_rows],
    )
    loss.backward()
    assert torch.isfinite(loss)
    assert torch.equal(logp.grad[~keep_rows], torch.zeros_like(logp.grad[~keep_rows]))
    assert torch.equal(logp.grad[~loss_mask], torch.zeros_like(logp.grad[~loss_mask]))
    assert 0 <= metrics["rejected/turn_rejected_fraction"] <= 1
