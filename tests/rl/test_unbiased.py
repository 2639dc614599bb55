"""Monte Carlo: TRLOO's policy gradient is unbiased; the self-inclusive GRPO mean shrinks it.

Policy: two turns, turn t picks y_t ~ Bernoulli(sigmoid(theta_t)) independently, reward
r_t = c_t * y_t. Turn 2 is masked (does not count) with probability 1 - q, independently of the
actions, so the per-turn group size n_2 varies as in multi-turn RL. Objective
J = E[r_1 + m_2 r_2], so dJ/dtheta_1 = p1 (1 - p1) c_1 and dJ/dtheta_2 = q p2 (1 - p2) c_2.

The estimator per group of N trajectories is (1/N) sum_i sum_t m_it * dlog pi(y_it)/dtheta_t * A_it,
with dlog pi/dtheta = y - p for a Bernoulli logit. TRLOO's expectation equals the gradient; the
GRPO mean gives (N-1)/N of it on turn 1 and E[(n_2-1)/n_2 | m_i2] of it on turn 2.

Tolerance: each check allows 5 standard errors of the mean over M = 40,000 groups (the standard
error is measured from the samples, about 1e-3 here). The GRPO shrinkage is 25 % (N = 4) of a
~0.2 gradient, i.e. more than 30 standard errors, so the test separates the two clearly.
"""

from math import comb

import torch

from drkernel.rl.trloo import grpo_mean_advantages, trloo_advantages

M_GROUPS, N = 40_000, 4
P = torch.tensor([0.3, 0.6], dtype=torch.float64)
C = torch.tensor([1.0, 2.0], dtype=torch.float64)
Q = 0.7


def _simulate():
    gen = torch.Generator().manual_seed(1234)
    rows = M_GROUPS * N
    y = (torch.rand(rows, 2, generator=gen, dtype=torch.float64) < P).to(torch.float64)
    mask = torch.ones(rows, 2, dtype=torch.bool)
    mask[:, 1] = torch.rand(rows, generator=gen) < Q
    rewards = y * C
    ids = torch.arange(M_GROUPS).repeat_interleave(N).tolist()
    return y, mask, rewards, ids


def _per_group_estimates(adv, y, mask):
    score = (y - P) * mask  # d log pi(y_t) / d theta_t, zero where the turn does not count
    return (score * adv).reshape(M_GROUPS, N, 2).sum(1) / N  # [M, 2]


def test_trloo_is_unbiased_and_grpo_mean_is_shrunk():
    y, mask, rewards, ids = _simulate()
    true_grad = torch.stack([P[0] * (1 - P[0]) * C[0], Q * P[1] * (1 - P[1]) * C[1]])
    # E[(n2 - 1)/n2 | this trajectory's turn 2 counts], with n2 - 1 ~ Binomial(N - 1, Q)
    shrink2 = sum(comb(N - 1, k) * Q**k * (1 - Q) ** (N - 1 - k) * k / (k + 1) for k in range(N))
    expected_grpo = true_grad * torch.tensor([(N - 1) / N, shrink2], dtype=torch.float64)

    for adv_fn, target in ((trloo_advantages, true_grad), (grpo_mean_advantages, expected_grpo)):
        g = _per_group_estimates(adv_fn(rewards, mask, ids), y, mask)
        mean, se = g.mean(0), g.std(0) / M_GROUPS**0.5
        assert (se < 3e-3).all()
        assert ((mean - target).abs() < 5 * se).all(), (adv_fn.__name__, mean, target, se)
        if adv_fn is grpo_mean_advantages:
            assert ((true_grad - mean).abs() > 10 * se).all()


def test_closed_form_score_matches_autograd():
    y, mask, rewards, ids = _simulate()
    adv = trloo_advantages(rewards, mask, ids)
    theta = torch.logit(P).clone().requires_grad_()
    logp = torch.distributions.Bernoulli(logits=theta.expand_as(y)).log_prob(y)
    surrogate = (logp * adv * mask).sum() / (M_GROUPS * N)
    surrogate.backward()
    assert torch.allclose(theta.grad, _per_group_estimates(adv, y, mask).mean(0))
