"""TRLOO: turn-level REINFORCE leave-one-out advantages (DR.Kernel section 1).

Layout: N trajectories by T turn slots; slot t holds turn t+1 of the trajectory. A trajectory
with fewer turns leaves its trailing slots masked. `turn_mask[i, t]` says the turn exists and
counts (not an infra error, not masked as a non-meaningful turn). Rejections (MRS, PRS) do NOT
clear `turn_mask`: a rejected turn still serves in the baseline of the others and only loses
its loss mask.

    r~_{i,t} = r_{i,t} if turn_mask[i, t] else 0
    G_{i,t}  = r~_{i,t} + gamma * G_{i,t+1},        G_{i,T} = 0           (reward-to-go)
    A_{i,t}  = G_{i,t} - 1/(n-1) * sum_{j != i} G_{j,t}                    (n >= 2)
             = n/(n-1) * (G_{i,t} - mean_j G_{j,t})
    A_{i,t}  = G_{i,t}                                                     (n == 1)

where j runs over the trajectories of the same prompt group whose turn t counts, and n is their
number. Masked turns get A = 0. No std normalisation: the leave-one-out baseline does not depend
on sample i, so the policy gradient estimate is unbiased. The self-inclusive GRPO mean
(A = G - mean) shrinks it by (n-1)/n, a factor that differs per turn when n varies.

Ablation baselines: `grpo_mean_advantages` (A = G - mean, same grouping) and
`rloo_last_turn_advantages` (what the reference silently ran with its default flags: one RLOO
advantage from the last counted turn's reward, broadcast to every counted turn).

`compute_trloo_outcome_advantage` registers TRLOO as "trloo" in verl's advantage estimator
registry so a verl trainer can select it by name.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo.core_algos import register_adv_est


def _check_inputs(turn_rewards: torch.Tensor, turn_mask: torch.Tensor, group_ids: Sequence[Hashable]) -> None:
    if turn_rewards.dim() != 2:
        raise ValueError(f"turn_rewards must be [N, T], got shape {tuple(turn_rewards.shape)}")
    if not torch.is_floating_point(turn_rewards):
        raise ValueError(f"turn_rewards must be a float tensor, got {turn_rewards.dtype}")
    if turn_mask.shape != turn_rewards.shape:
        raise ValueError(f"turn_mask shape {tuple(turn_mask.shape)} != turn_rewards {tuple(turn_rewards.shape)}")
    if turn_mask.dtype != torch.bool:
        raise ValueError(f"turn_mask must be a bool tensor, got {turn_mask.dtype}")
    if len(group_ids) != turn_rewards.shape[0]:
        raise ValueError(f"{len(group_ids)} group ids for {turn_rewards.shape[0]} trajectories")
    if not torch.isfinite(turn_rewards[turn_mask]).all():
        raise ValueError("turn_rewards must be finite on every counted turn")


def _dense_group_index(group_ids: Sequence[Hashable], device: torch.device) -> tuple[torch.Tensor, int]:
    """Map arbitrary hashable prompt ids to 0..G-1."""
    codes: dict[Hashable, int] = {}
    index = [codes.setdefault(g, len(codes)) for g in group_ids]
    return torch.tensor(index, dtype=torch.long, device=device), len(codes)


def reward_to_go(turn_rewards: torch.Tensor, turn_mask: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """G_t = r_t + gamma * G_{t+1} over turn slots, masked turns contributing reward 0."""
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    rewards = torch.where(turn_mask, turn_rewards, torch.zeros_like(turn_rewards))
    returns = torch.zeros_like(rewards)
    running = rewards.new_zeros(rewards.shape[0])
    for t in range(rewards.shape[1] - 1, -1, -1):
        running = rewards[:, t] + gamma * running
        returns[:, t] = running
    return returns


def _group_sums(values: torch.Tensor, mask: torch.Tensor, index: torch.Tensor, n_groups: int):
    """Per (group, column): sum of masked values and count of masked-in entries, gathered per row."""
    m = mask.to(values.dtype)
    sums = values.new_zeros((n_groups, values.shape[1])).index_add_(0, index, values * m)
    counts = values.new_zeros((n_groups, values.shape[1])).index_add_(0, index, m)
    return sums[index], counts[index]


def _grouped_returns(
    turn_rewards: torch.Tensor, turn_mask: torch.Tensor, group_ids: Sequence[Hashable], gamma: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reward-to-go G [N, T] and, per row, the sum and count of G over its (group, turn)."""
    _check_inputs(turn_rewards, turn_mask, group_ids)
    returns = reward_to_go(turn_rewards, turn_mask, gamma)
    index, n_groups = _dense_group_index(group_ids, returns.device)
    sums, counts = _group_sums(returns, turn_mask, index, n_groups)
    return returns, sums, counts


def trloo_advantages(
    turn_rewards: torch.Tensor,
    turn_mask: torch.Tensor,
    group_ids: Sequence[Hashable],
    gamma: float = 1.0,
) -> torch.Tensor:
    """TRLOO advantages [N, T] (formula in the module docstring)."""
    returns, sums, counts = _grouped_returns(turn_rewards, turn_mask, group_ids, gamma)
    others = (sums - returns) / (counts - 1).clamp(min=1)
    adv = torch.where(counts > 1, returns - others, returns)
    return torch.where(turn_mask, adv, torch.zeros_like(adv))


def grpo_mean_advantages(
    turn_rewards: torch.Tensor,
    turn_mask: torch.Tensor,
    group_ids: Sequence[Hashable],
    gamma: float = 1.0,
) -> torch.Tensor:
    """Multi-turn GRPO without std: A = G - mean over the (group, turn) including i (biased by (n-1)/n)."""
    returns, sums, counts = _grouped_returns(turn_rewards, turn_mask, group_ids, gamma)
    adv = returns - sums / counts.clamp(min=1)
    return torch.where(turn_mask, adv, torch.zeros_like(adv))


def rloo_last_turn_advantages(
    turn_rewards: torch.Tensor,
    turn_mask: torch.Tensor,
    group_ids: Sequence[Hashable],
    gamma: float = 1.0,
) -> torch.Tensor:
    """Outcome RLOO: the reward of each trajectory's last counted turn, leave-one-out over the
    group's trajectories that have a counted turn, broadcast to all counted turns.

    `gamma` is accepted for a uniform estimator signature and has no effect (a single outcome).
    """
    del gamma
    _check_inputs(turn_rewards, turn_mask, group_ids)
    n, t = turn_rewards.shape
    has_turn = turn_mask.any(dim=1)
    slots = torch.arange(t, device=turn_mask.device).expand(n, t)
    last = torch.where(turn_mask, slots, torch.full_like(slots, -1)).max(dim=1).values.clamp(min=0)
    outcome = turn_rewards.gather(1, last[:, None])
    outcome = torch.where(has_turn[:, None], outcome, torch.zeros_like(outcome))
    index, n_groups = _dense_group_index(group_ids, turn_rewards.device)
    sums, counts = _group_sums(outcome, has_turn[:, None], index, n_groups)
    others = (sums - outcome) / (counts - 1).clamp(min=1)
    adv = torch.where(counts > 1, outcome - others, outcome)
    return torch.where(turn_mask, adv.expand(n, t), torch.zeros_like(turn_rewards))


ESTIMATORS = {
    "trloo": trloo_advantages,
    "grpo_mean": grpo_mean_advantages,
    "rloo_last_turn": rloo_last_turn_advantages,
}


def turn_advantages(
    estimator: str,
    turn_rewards: torch.Tensor,
    turn_mask: torch.Tensor,
    group_ids: Sequence[Hashable],
    gamma: float = 1.0,
) -> torch.Tensor:
    """Dispatch to one of ESTIMATORS by its config name."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown advantage estimator {estimator!r}; choose from {sorted(ESTIMATORS)}")
    return ESTIMATORS[estimator](turn_rewards, turn_mask, group_ids, gamma)


@register_adv_est("trloo")
def compute_trloo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | Sequence[Hashable],
    config: Any = None,
    num_turns: int | None = None,
    turn_mask: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """TRLOO behind verl's estimator signature (rows are turns, the layout DR.Kernel's trainer uses).

    - rows come in trajectory-major blocks of `num_turns` rows: [traj0_t1..tT, traj1_t1..tT, ...];
      a missing turn is a row whose mask is all zero;
    - `index[row]` is the prompt uid (verl's `uid`), identical for all rows of a trajectory;
    - a row's turn reward is the sum of its token_level_rewards;
    - `turn_mask` [rows] says which turns join the baselines. Pass the loss mask from before
      MRS/PRS so rejected turns still serve as baselines; by default it is response_mask.any(-1),
      which only equals that when no rejection has edited response_mask yet.
    - `num_turns` comes from the keyword or from `config.get("num_turns")`; gamma from config.

    Returns (advantages, returns), each [rows, response_length], broadcast over the row's tokens
    and multiplied by response_mask.
    """
    del kwargs
    if num_turns is None and config is not None:
        num_turns = config.get("num_turns")
    if num_turns is None or num_turns < 1:
        raise ValueError("trloo needs num_turns (keyword or config.num_turns): rows per trajectory")
    rows = token_level_rewards.shape[0]
    if rows % num_turns:
        raise ValueError(f"{rows} rows is not a multiple of num_turns={num_turns}")
    gamma = float(config.get("gamma", 1.0)) if config is not None else 1.0
    n = rows // num_turns
    row_mask = response_mask.bool().any(dim=-1) if turn_mask is None else turn_mask.bool().reshape(rows)
    uids = list(index)
    traj_uids = uids[::num_turns]
    for i in range(n):
        if any(u != traj_uids[i] for u in uids[i * num_turns : (i + 1) * num_turns]):
            raise ValueError(f"rows of trajectory {i} carry different uids")
    rewards = token_level_rewards.sum(dim=-1).reshape(n, num_turns)
    mask = row_mask.reshape(n, num_turns)
    adv = trloo_advantages(rewards, mask, traj_uids, gamma).reshape(rows, 1)
    ret = reward_to_go(rewards, mask, gamma).reshape(rows, 1)
    token_mask = response_mask.to(token_level_rewards.dtype)
    return adv * token_mask, ret * token_mask
