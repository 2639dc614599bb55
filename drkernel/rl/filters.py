"""Multi-turn data masking and the group-variance filter (DR.Kernel sections 2.1 and 2.5).

Meaningful-turn mask. Turn 1 always counts. For t > 1, with M = max of the earlier counted turns'
rewards: if M > 0 the turn counts only if r_t > 0. Once a trajectory has produced a kernel with
positive reward, a later regression is masked (neither rewarded nor punished), not penalised.

Group-variance filter (DAPO-style dynamic sampling). A prompt group whose trajectories all earn
the same last-turn reward carries no learning signal under a leave-one-out baseline, so it is
dropped when std(last-turn rewards) < min_std (population std) or when it has fewer than
min_group_size trajectories. When fewer than `target_groups` survive, the step is skipped and the
survivors wait in a carry-over buffer to be pooled with the next step's groups.

The reference passed MAX_SKIP_STEPS but never read it, so a hard dataset could generate forever
without an update. Here the bound holds: after `max_skip_steps` consecutive skips the next step
trains on whatever survived (a smaller batch) instead of skipping again; if nothing survived, that
step is empty and the count restarts. The buffer holds at most `max_buffer_groups` groups; on
overflow the oldest are evicted (they are also the most off-policy). When more than
`target_groups` survive, complete groups are preferred, chosen at random with a seeded generator,
the rest filled from incomplete ones; the chosen groups keep their arrival order and the excess is
discarded, as in the reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import torch

from drkernel.config.algorithm import FilterConfig

G = TypeVar("G")


def meaningful_turn_mask(turn_rewards: torch.Tensor, turn_mask: torch.Tensor) -> torch.Tensor:
    """[N, T] bool: turn_mask minus turns that regress to reward <= 0 after a positive turn."""
    if turn_rewards.shape != turn_mask.shape or turn_rewards.dim() != 2:
        raise ValueError(f"turn_rewards and turn_mask must both be [N, T]: {tuple(turn_rewards.shape)}")
    mask = turn_mask.bool()
    neg_inf = torch.full_like(turn_rewards, float("-inf"))
    best_so_far = torch.cummax(torch.where(mask, turn_rewards, neg_inf), dim=1).values
    best_before = torch.cat([neg_inf[:, :1], best_so_far[:, :-1]], dim=1)
    return mask & ((best_before <= 0) | (turn_rewards > 0))


def last_turn_rewards(turn_rewards: torch.Tensor, turn_mask: torch.Tensor) -> torch.Tensor:
    """[N]: reward of the last turn slot, 0 where it does not count (the reference zeroes masked
    rewards before filtering)."""
    last = turn_rewards[:, -1]
    return torch.where(turn_mask[:, -1].bool(), last, torch.zeros_like(last))


@dataclass(frozen=True)
class FilterStep(Generic[G]):
    """One step's decision. `train` empty and `skipped` True: no update this step."""

    train: list[G]
    skipped: bool
    forced: bool
    metrics: dict[str, float] = field(default_factory=dict)


class GroupVarianceFilter(Generic[G]):
    """Stateful filter + carry-over buffer; groups are opaque to it, scored by last-turn rewards."""

    def __init__(self, cfg: FilterConfig, target_groups: int, group_size: int):
        if target_groups < 1 or group_size < 1:
            raise ValueError(f"target_groups and group_size must be >= 1, got {target_groups}, {group_size}")
        self.cfg = cfg
        self.target_groups = target_groups
        self.group_size = group_size
        self.min_group_size = cfg.min_group_size if cfg.min_group_size is not None else group_size // 2 + 1
        self.consecutive_skips = 0
        self._buffer: list[tuple[G, torch.Tensor]] = []
        self._generator = torch.Generator().manual_seed(cfg.seed)

    @property
    def buffered(self) -> list[G]:
        return [g for g, _ in self._buffer]

    def state_dict(self) -> dict:
        """Everything a resumed run needs so buffered groups are neither lost nor repeated."""
        return {
            "buffer": [(g, s.clone()) for g, s in self._buffer],
            "consecutive_skips": self.consecutive_skips,
            "rng": self._generator.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self._buffer = [(g, torch.as_tensor(s).reshape(-1)) for g, s in state["buffer"]]
        self.consecutive_skips = int(state["consecutive_skips"])
        self._generator.set_state(state["rng"])

    def _passes(self, scores: torch.Tensor) -> tuple[bool, str]:
        if not self.cfg.enabled:
            return True, ""
        if scores.numel() < self.min_group_size:
            return False, "small"
        if float(scores.to(torch.float64).std(correction=0)) < self.cfg.min_std:
            return False, "low_variance"
        return True, ""

    def _select(self, survivors: list[tuple[G, torch.Tensor]]) -> list[tuple[G, torch.Tensor]]:
        complete = [i for i, (_, s) in enumerate(survivors) if s.numel() >= self.group_size]
        partial = [i for i, (_, s) in enumerate(survivors) if s.numel() < self.group_size]
        chosen: list[int] = []
        for pool in (complete, partial):
            need = self.target_groups - len(chosen)
            order = torch.randperm(len(pool), generator=self._generator).tolist()
            chosen += [pool[k] for k in order[:need]]
        return [survivors[i] for i in sorted(chosen)]

    def step(self, groups: Sequence[G], last_rewards: Sequence[torch.Tensor]) -> FilterStep[G]:
        """Pool the buffer with this step's groups (scored by their 1-D last-turn rewards) and decide."""
        if len(groups) != len(last_rewards):
            raise ValueError(f"{len(groups)} groups but {len(last_rewards)} score tensors")
        pool = self._buffer + [(g, torch.as_tensor(s).reshape(-1)) for g, s in zip(groups, last_rewards)]
        self._buffer = []
        survivors, dropped = [], {"small": 0, "low_variance": 0}
        for g, s in pool:
            ok, why = self._passes(s)
            if ok:
                survivors.append((g, s))
            else:
                dropped[why] += 1
        metrics = {
            "filter/pool_groups": float(len(pool)),
            "filter/dropped_low_variance": float(dropped["low_variance"]),
            "filter/dropped_small": float(dropped["small"]),
            "filter/survivors": float(len(survivors)),
        }
        if len(survivors) >= self.target_groups:
            chosen = self._select(survivors)
            self.consecutive_skips = 0
            metrics["filter/discarded_excess"] = float(len(survivors) - len(chosen))
            return FilterStep([g for g, _ in chosen], skipped=False, forced=False, metrics=metrics)
        if self.consecutive_skips >= self.cfg.max_skip_steps:
            self.consecutive_skips = 0
            metrics["filter/forced_groups"] = float(len(survivors))
            return FilterStep([g for g, _ in survivors], skipped=not survivors, forced=True, metrics=metrics)
        self.consecutive_skips += 1
        cap = self.cfg.max_buffer_groups
        evicted = max(len(survivors) - cap, 0)
        self._buffer = survivors[evicted:]
        metrics["filter/buffered"] = float(len(self._buffer))
        metrics["filter/evicted"] = float(evicted)
        metrics["filter/consecutive_skips"] = float(self.consecutive_skips)
        return FilterStep([], skipped=True, forced=False, metrics=metrics)
