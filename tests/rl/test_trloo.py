"""TRLOO and its ablation baselines against hand-computed values, properties and verl's registry."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from verl.trainer.config import AlgoConfig
from verl.trainer.ppo.core_algos import compute_rloo_outcome_advantage, get_adv_estimator_fn

from drkernel.rl.trloo import (
    compute_trloo_outcome_advantage,
    grpo_mean_advantages,
    reward_to_go,
    rloo_last_turn_advantages,
    trloo_advantages,
    turn_advantages,
)

# Group "a": three trajectories with all turns; group "b": one trajectory whose turns 2-3 are masked.
R = torch.tensor([[1.0, 2.0, 3.0], [0.0, 1.0, 0.0], [2.0, 2.0, 2.0], [5.0, 7.0, 9.0]])
M = torch.tensor([[1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 0, 0]], dtype=torch.bool)
IDS = ["a", "a", "a", "b"]


def test_reward_to_go_by_hand():
    # masked turns of trajectory 3 contribute 0, so its G_1 is 5 not 21
    expected = torch.tensor([[6.0, 5.0, 3.0], [1.0, 1.0, 0.0], [6.0, 4.0, 2.0], [5.0, 0.0, 0.0]])
    assert torch.equal(reward_to_go(R, M), expected)
    # gamma = 0.5: G = r1 + 0.5 r2 + 0.25 r3
    assert reward_to_go(R[:1], M[:1], gamma=0.5).tolist() == [[1 + 1 + 0.75, 2 + 1.5, 3.0]]


def test_trloo_by_hand():
    # turn 1, group a: G = 6, 1, 6 -> A_0 = 6 - (1 + 6)/2
    expected = torch.tensor(
        [
            [6 - 3.5, 5 - 2.5, 3 - 1.0],
            [1 - 6.0, 1 - 4.5, 0 - 2.5],
            [6 - 3.5, 4 - 3.0, 2 - 1.5],
            [5.0, 0.0, 0.0],  # group of one keeps A = G; masked turns get 0
        ]
    )
    assert torch.allclose(trloo_advantages(R, M, IDS), expected)


def test_grpo_mean_and_rloo_last_turn_by_hand():
    g = torch.tensor([[6.0, 5.0, 3.0], [1.0, 1.0, 0.0], [6.0, 4.0, 2.0]])
    expected = torch.cat([g - g.mean(0, keepdim=True), torch.zeros(1, 3)])  # group of one: A = G - G = 0
    assert torch.allclose(grpo_mean_advantages(R, M, IDS), expected)
    # outcome = last counted turn's reward: 3, 0, 2 in group a; 5 for the singleton b
    outcome = torch.tensor([3 - 1.0, 0 - 2.5, 2 - 1.5])
    expected = torch.cat([outcome[:, None].expand(3, 3), torch.tensor([[5.0, 0.0, 0.0]])])
    assert torch.allclose(rloo_last_turn_advantages(R, M, IDS), expected)


def test_trloo_equals_grpo_mean_rescaled_by_n_over_n_minus_1():
    n = 3
    assert torch.allclose(trloo_advantages(R, M, IDS)[:3], n / (n - 1) * grpo_mean_advantages(R, M, IDS)[:3])


def test_edge_cases_are_nan_free():
    all_masked = torch.zeros_like(M)
    for fn in (trloo_advantages, grpo_mean_advantages, rloo_last_turn_advantages):
        out = fn(R, all_masked, IDS)
        assert torch.equal(out, torch.zeros_like(R))
        equal = fn(torch.full((4, 3), 1.3), torch.ones_like(M), ["g"] * 4)
        assert torch.equal(equal, torch.zeros(4, 3))  # all rewards equal: no signal
        empty = fn(torch.zeros(0, 3), torch.zeros(0, 3, dtype=torch.bool), [])
        assert empty.shape == (0, 3)
    # NaN rewards in slots that do not count are ignored
    r = R.clone()
    r[3, 1:] = float("nan")
    assert torch.equal(trloo_advantages(r, M, IDS), trloo_advantages(R, M, IDS))


def test_group_of_one_and_singleton_turn_group_keep_the_return():
    mask = M.clone()
    mask[1:3, 2] = False  # turn 3 of group a now has only trajectory 0
    adv = trloo_advantages(R, mask, IDS)
    assert adv[0, 2] == 3.0 and adv[1, 2] == 0 and adv[2, 2] == 0
    assert torch.equal(trloo_advantages(R[3:], M[3:], ["solo"]), torch.tensor([[5.0, 0.0, 0.0]]))


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="group ids"):
        trloo_advantages(R, M, IDS[:3])
    with pytest.raises(ValueError, match="bool"):
        trloo_advantages(R, M.float(), IDS)
    with pytest.raises(ValueError, match="shape"):
        trloo_advantages(R, M[:, :2], IDS)
    with pytest.raises(ValueError, match="finite"):
        trloo_advantages(torch.tensor([[float("nan")]]), torch.ones(1, 1, dtype=torch.bool), ["a"])
    with pytest.raises(ValueError, match="gamma"):
        trloo_advantages(R, M, IDS, gamma=1.5)
    with pytest.raises(ValueError, match="unknown advantage estimator"):
        turn_advantages("grpo", R, M, IDS)


@st.composite
def batches(draw):
    n_groups = draw(st.integers(1, 4))
    sizes = draw(st.lists(st.integers(1, 5), min_size=n_groups, max_size=n_groups))
    t = draw(st.integers(1, 4))
    n = sum(sizes)
    ids = [g for g, s in enumerate(sizes) for _ in range(s)]
    rewards = draw(st.lists(st.floats(-3, 3, allow_nan=False), min_size=n * t, max_size=n * t))
    mask = draw(st.lists(st.booleans(), min_size=n * t, max_size=n * t))
    gamma = draw(st.sampled_from([1.0, 0.9, 0.0]))
    r = torch.tensor(rewards, dtype=torch.float64).reshape(n, t)
    return r, torch.tensor(mask).reshape(n, t), ids, gamma


@settings(max_examples=60, deadline=None)
@given(batches())
def test_trloo_sums_to_zero_in_every_group_with_two_or_more_members(batch):
    r, mask, ids, gamma = batch
    adv = trloo_advantages(r, mask, ids, gamma)
    g = reward_to_go(r, mask, gamma)
    ids_t = torch.tensor(ids)
    for gid in set(ids):
        for t in range(r.shape[1]):
            members = (ids_t == gid) & mask[:, t]
            n = int(members.sum())
            if n >= 2:
                assert abs(float(adv[members, t].sum())) < 1e-9
                mean = g[members, t].mean()
                assert torch.allclose(adv[members, t], n / (n - 1) * (g[members, t] - mean))
            elif n == 1:
                assert torch.equal(adv[members, t], g[members, t])
    assert torch.equal(adv[~mask], torch.zeros_like(adv[~mask]))
    assert torch.isfinite(adv).all()


def test_single_turn_trloo_equals_verl_rloo():
    torch.manual_seed(0)
    scores = torch.randn(12)
    ids = np.array([0, 0, 0, 1, 1, 2, 3, 3, 3, 3, 4, 4], dtype=object)
    token_rewards = torch.zeros(12, 5)
    token_rewards[:, -1] = scores
    verl_adv, _ = compute_rloo_outcome_advantage(token_rewards, torch.ones(12, 5), ids)
    ours = trloo_advantages(scores[:, None], torch.ones(12, 1, dtype=torch.bool), list(ids))
    assert torch.allclose(verl_adv[:, 0], ours[:, 0], atol=1e-6)


def _token_layout(rewards, mask, length=4):
    """Rows = turns (trajectory-major); the reward sits on each turn's last valid token."""
    n, t = rewards.shape
    resp = torch.zeros(n * t, length)
    tok = torch.zeros(n * t, length)
    for row in range(n * t):
        i, k = divmod(row, t)
        if mask[i, k]:
            valid = 1 + (row % length)
            resp[row, :valid] = 1
            tok[row, valid - 1] = rewards[i, k]
    return tok, resp


def test_registered_in_verl_and_matches_the_turn_layout():
    assert get_adv_estimator_fn("trloo") is compute_trloo_outcome_advantage
    tok, resp = _token_layout(R, M)
    index = np.array([u for u in IDS for _ in range(3)], dtype=object)
    adv, ret = get_adv_estimator_fn("trloo")(
        token_level_rewards=tok, response_mask=resp, index=index, config=AlgoConfig(gamma=0.5), num_turns=3
    )
    expected = trloo_advantages(R, M, IDS, gamma=0.5).reshape(-1, 1) * resp
    assert torch.allclose(adv, expected)
    assert torch.allclose(ret, reward_to_go(R, M, 0.5).reshape(-1, 1) * resp)


def test_verl_adapter_keeps_rejected_rows_in_the_baseline_through_turn_mask():
    tok, resp = _token_layout(R, M)
    index = np.array([u for u in IDS for _ in range(3)], dtype=object)
    rejected = resp.clone()
    rejected[3] = 0  # MRS/PRS cleared trajectory 1, turn 1
    adv, _ = compute_trloo_outcome_advantage(tok, rejected, index, num_turns=3, turn_mask=resp.any(-1))
    full = trloo_advantages(R, M, IDS).reshape(-1, 1)
    assert torch.allclose(adv, full * rejected)  # others' advantages unchanged, rejected row gets no signal
    naive, _ = compute_trloo_outcome_advantage(tok, rejected, index, num_turns=3)
    assert not torch.allclose(naive, adv)  # without turn_mask the rejected row would leave the baseline


def test_verl_adapter_errors():
    tok, resp = _token_layout(R, M)
    index = np.array([u for u in IDS for _ in range(3)], dtype=object)
    with pytest.raises(ValueError, match="num_turns"):
        compute_trloo_outcome_advantage(tok, resp, index)
    with pytest.raises(ValueError, match="multiple"):
        compute_trloo_outcome_advantage(tok, resp, index, num_turns=5)
    bad = index.copy()
    bad[1] = "z"
    with pytest.raises(ValueError, match="different uids"):
        compute_trloo_outcome_advantage(tok, resp, bad, num_turns=3)
