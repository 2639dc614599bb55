"""Finished trajectories -> one training step's tensors: rewards, masks, group filter, TRLOO, PRS.

The order is the recipe's (drkernel_spec.md section 0), adapted to whole multi-turn token streams:

1. Per-turn rewards and the turn mask: a turn counts when it exists and was scored (an infra_error turn is
   `masked` and never scored), minus the turns the meaningful-turn rule masks (filters.meaningful_turn_mask).
2. The group-variance filter (stateful, owned by the caller so its buffer goes into checkpoints) on each
   trajectory's last *existing* turn. Our layout puts turn k in slot k-1 and leaves trailing slots empty when an
   episode ends early, so "slot T-1" would read 0 for every early finisher; the recipe pads at the front
   and reads the last real turn, which is what we read.
3. TRLOO advantages per (group, turn slot) over the chosen groups.
4. PRS keep mask per turn (seeded generator, also the caller's).
5. Token tensors. One row per trajectory: the full sequence prompt + response (feedback included, as the
   policy saw it), so the trainer recomputes every turn's log-probs in one forward pass. `token_turn` says
   which turn slot sampled each position (-1: prompt, feedback, padding); `turn_positions` indexes the
   [N, S] tensors into the [N, T, L] layout the MRS and loss code uses (one loss row per turn).

MRS needs the trainer's log-probs, so it is applied in drkernel.rl.update. Rollout metrics describe every
incoming trajectory (what the policy produced), not just the groups the filter chose.
"""

from __future__ import annotations

import base64
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from drkernel.config.algorithm import AlgorithmConfig
from drkernel.rl.filters import GroupVarianceFilter, meaningful_turn_mask
from drkernel.rl.prs import prs_keep_mask
from drkernel.rl.trloo import turn_advantages
from drkernel.types.trajectory import Trajectory, Turn

TrajectoryGroup = list[Trajectory]


@dataclass
class StepBatch:
    """One optimizer step's data. N trajectories, S sequence positions, T turn slots, L tokens per turn.

    When `skipped` is True the filter held the step back and every tensor is empty (N = 0).
    """

    skipped: bool
    group_ids: list[str]  # [N] prompt group of each row
    sample_ids: list[tuple[str, int]]  # [N] (group_id, sample_index)
    input_ids: torch.Tensor  # [N, S] long, right-padded with pad_id
    attention_mask: torch.Tensor  # [N, S] long
    token_turn: torch.Tensor  # [N, S] long: turn slot that sampled the token, -1 elsewhere
    response_mask: torch.Tensor  # [N, S] bool: sampled tokens of counted turns (before MRS and PRS)
    rollout_log_probs: torch.Tensor  # [N, S] float32: the engine's log-prob of each sampled token, 0 elsewhere
    advantages: torch.Tensor  # [N, S] float32: the token's turn advantage, 0 off the response mask
    turn_positions: torch.Tensor  # [N, T, L] long: sequence position of each turn's l-th token (0 = padding)
    turn_position_mask: torch.Tensor  # [N, T, L] bool: the position is a sampled token of that turn
    turn_rewards: torch.Tensor  # [N, T] float32
    turn_mask: torch.Tensor  # [N, T] bool: counted turns (exist, scored, meaningful)
    turn_advantages: torch.Tensor  # [N, T] float32
    prs_keep: torch.Tensor  # [N, T] bool: False for turns PRS rejects
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def num_rows(self) -> int:
        return int(self.input_ids.shape[0])

    def to_turns(self, x: torch.Tensor) -> torch.Tensor:
        """[N, S] per-position values -> [N, T, L] per-turn rows (0 / False on padding)."""
        if x.shape != self.input_ids.shape:
            raise ValueError(f"expected a [N, S] tensor shaped {tuple(self.input_ids.shape)}, got {tuple(x.shape)}")
        n, t, length = self.turn_positions.shape
        gathered = x.gather(1, self.turn_positions.reshape(n, t * length).to(x.device)).reshape(n, t, length)
        return torch.where(self.turn_position_mask.to(x.device), gathered, torch.zeros_like(gathered))

    def loss_turn_mask(self) -> torch.Tensor:
        """[N, T, L] bool: the response mask in the turn layout with PRS applied (MRS comes later)."""
        return self.to_turns(self.response_mask) & self.prs_keep[..., None]

    def select(self, rows: Sequence[int]) -> StepBatch:
        """The batch restricted to `rows` (e.g. this rank's share), tensors trimmed to their longest row."""
        index = torch.as_tensor(list(rows), dtype=torch.long)
        seq = int(self.attention_mask[index].sum(-1).max()) if len(index) else 0
        turn_len = int(self.turn_position_mask[index].sum(-1).max()) if len(index) else 0

        def rows_of(x: torch.Tensor, trim: int | None = None) -> torch.Tensor:
            picked = x[index]
            return picked[..., :trim] if trim is not None else picked

        return StepBatch(
            skipped=self.skipped,
            group_ids=[self.group_ids[i] for i in index.tolist()],
            sample_ids=[self.sample_ids[i] for i in index.tolist()],
            input_ids=rows_of(self.input_ids, seq),
            attention_mask=rows_of(self.attention_mask, seq),
            token_turn=rows_of(self.token_turn, seq),
            response_mask=rows_of(self.response_mask, seq),
            rollout_log_probs=rows_of(self.rollout_log_probs, seq),
            advantages=rows_of(self.advantages, seq),
            turn_positions=rows_of(self.turn_positions, turn_len),
            turn_position_mask=rows_of(self.turn_position_mask, turn_len),
            turn_rewards=rows_of(self.turn_rewards),
            turn_mask=rows_of(self.turn_mask),
            turn_advantages=rows_of(self.turn_advantages),
            prs_keep=rows_of(self.prs_keep),
            metrics=dict(self.metrics),
        )


# ---- per-turn facts -----------------------------------------------------------------------------------------------
def _verdict(turn: Turn) -> dict[str, Any]:
    return turn.verdict or {}


def _finite(value: Any, default: float) -> float:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else default


def _turn_table(trajectories: Sequence[Trajectory], num_slots: int) -> dict[str, torch.Tensor]:
    """[N, T] reward, exists (scored), correct, coverage, speedup."""
    n = len(trajectories)
    reward = torch.zeros(n, num_slots)
    exists = torch.zeros(n, num_slots, dtype=torch.bool)
    correct = torch.zeros(n, num_slots, dtype=torch.bool)
    coverage = torch.zeros(n, num_slots)
    speedup = torch.zeros(n, num_slots)
    for i, traj in enumerate(trajectories):
        for turn in traj.turns:
            if turn.masked:
                continue
            slot = turn.index
            if not math.isfinite(turn.reward):
                raise ValueError(f"trajectory {traj.group_id}/{traj.sample_index} turn {slot}: reward {turn.reward}")
            reward[i, slot] = turn.reward
            exists[i, slot] = True
            correct[i, slot] = turn.correct
            coverage[i, slot] = _finite(_verdict(turn).get("coverage"), 0.0)
            speedup[i, slot] = _finite(_verdict(turn).get("speedup"), 0.0)
    return {"reward": reward, "exists": exists, "correct": correct, "coverage": coverage, "speedup": speedup}


def _last_existing_reward(reward: torch.Tensor, exists: torch.Tensor, counted: torch.Tensor) -> torch.Tensor:
    """[N]: reward of each trajectory's last scored turn, 0 when that turn does not count (or none exists)."""
    slots = torch.arange(reward.shape[1]).expand_as(reward)
    last = torch.where(exists, slots, torch.full_like(slots, -1)).max(dim=1).values
    picked = last.clamp(min=0)[:, None]
    chosen = reward.gather(1, picked)
    value = torch.where(counted.gather(1, picked), chosen, torch.zeros_like(chosen))
    return torch.where(last >= 0, value[:, 0], torch.zeros_like(value[:, 0]))


def _check(trajectories: Sequence[Trajectory], max_turns: int | None) -> int:
    """Validate every trajectory; return the number of turn slots T."""
    slots = 0
    for traj in trajectories:
        traj.check_aligned()
        if not traj.prompt_ids:
            raise ValueError(f"trajectory {traj.group_id}/{traj.sample_index} has an empty prompt")
        indices = [t.index for t in traj.turns]
        if indices != list(range(len(indices))):
            raise ValueError(f"trajectory {traj.group_id}/{traj.sample_index}: turn indices {indices} are not 0..k-1")
        covered = sum(t.end - t.start for t in traj.turns)
        if covered != sum(traj.response_mask):
            raise ValueError(
                f"trajectory {traj.group_id}/{traj.sample_index}: {sum(traj.response_mask)} sampled tokens"
                f" but its turns span {covered}"
            )
        slots = max(slots, len(indices))
    if max_turns is not None:
        if slots > max_turns:
            raise ValueError(f"a trajectory has {slots} turns, more than max_turns={max_turns}")
        slots = max_turns
    return max(slots, 1)


def group_trajectories(trajectories: Sequence[Trajectory]) -> list[TrajectoryGroup]:
    """Trajectories grouped by group_id in first-arrival order, samples sorted; duplicates refused."""
    groups: dict[str, TrajectoryGroup] = {}
    for traj in trajectories:
        groups.setdefault(traj.group_id, []).append(traj)
    for gid, members in groups.items():
        members.sort(key=lambda t: t.sample_index)
        indices = [t.sample_index for t in members]
        if len(set(indices)) != len(indices):
            raise ValueError(f"group {gid} holds sample indices {indices}: a sample was delivered twice")
    return list(groups.values())


# ---- metrics --------------------------------------------------------------------------------------------------------
def rollout_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Quality of what the policy produced: rates over scored turns, Fast@1 over correct turns.

    Fast@1 here is the fraction of correct turns with speedup > 1 (on CPU the verifier's interpreter timings
    make it 0); `rollout/fast1_in_all` is the recipe's share of all scored turns that are correct and faster.
    `rollout/correct_rate/turn<k>` is the correct share of scored k-th turns (does feedback help?);
    `rollout/speedup_correct_median|best` summarise the speedups of correct kernels (absent when none was).
    """
    scored = [t for traj in trajectories for t in traj.turns if not t.masked]
    all_turns = [t for traj in trajectories for t in traj.turns]
    correct = [t for t in scored if t.correct]
    faster = [t for t in correct if _finite(_verdict(t).get("speedup"), 0.0) > 1.0]
    hacks = Counter(str(_verdict(t)["hack"]) for t in scored if _verdict(t).get("hack") is not None)
    generated = [t.end - t.start for t in all_turns]

    def rate(count: int, total: int) -> float:
        return count / total if total else 0.0

    metrics = {
        "rollout/trajectories": float(len(trajectories)),
        "rollout/turns": float(len(all_turns)),
        "rollout/reward_mean": rate(sum(t.reward for t in scored), len(scored)),
        "rollout/format_rate": rate(sum(t.code is not None for t in scored), len(scored)),
        "rollout/compile_rate": rate(sum(bool(_verdict(t).get("compiled")) for t in scored), len(scored)),
        "rollout/correct_rate": rate(len(correct), len(scored)),
        "rollout/fast1": rate(len(faster), len(correct)),
        "rollout/fast1_in_all": rate(len(faster), len(scored)),
        "rollout/hack_rate": rate(sum(hacks.values()), len(scored)),
        "rollout/coverage_mean": rate(sum(_finite(_verdict(t).get("coverage"), 0.0) for t in correct), len(correct)),
        "rollout/infra_masked_turn_fraction": rate(len(all_turns) - len(scored), len(all_turns)),
        "rollout/response_length_mean": rate(sum(generated), len(generated)),
    }
    metrics.update({f"rollout/hack_rate/{name}": rate(count, len(scored)) for name, count in sorted(hacks.items())})
    for k in sorted({t.index for t in scored}):
        at_k = [t for t in scored if t.index == k]
        metrics[f"rollout/correct_rate/turn{k + 1}"] = rate(sum(t.correct for t in at_k), len(at_k))
    speedups = sorted(s for t in correct if (s := _finite(_verdict(t).get("speedup"), -1.0)) >= 0)
    if speedups:
        metrics["rollout/speedup_correct_median"] = statistics.median(speedups)
        metrics["rollout/speedup_correct_best"] = speedups[-1]
    return metrics


# ---- the builder ----------------------------------------------------------------------------------------------------
def _empty(num_slots: int, metrics: dict[str, float]) -> StepBatch:
    long2, bool2 = torch.zeros(0, 0, dtype=torch.long), torch.zeros(0, 0, dtype=torch.bool)
    turns_f, turns_b = torch.zeros(0, num_slots), torch.zeros(0, num_slots, dtype=torch.bool)
    return StepBatch(
        True,
        [],
        [],
        long2,
        long2.clone(),
        long2.clone(),
        bool2,
        torch.zeros(0, 0),
        torch.zeros(0, 0),
        torch.zeros(0, num_slots, 0, dtype=torch.long),
        torch.zeros(0, num_slots, 0, dtype=torch.bool),
        turns_f,
        turns_b,
        turns_f.clone(),
        turns_b.clone(),
        metrics,
    )


def _token_tensors(
    trajectories: Sequence[Trajectory], turn_mask: torch.Tensor, turn_adv: torch.Tensor, pad_id: int
) -> dict[str, torch.Tensor]:
    n, num_slots = turn_mask.shape
    seq = max(t.num_tokens for t in trajectories)
    turn_len = max([t.end - t.start for traj in trajectories for t in traj.turns] + [1])
    out = {
        "input_ids": torch.full((n, seq), pad_id, dtype=torch.long),
        "attention_mask": torch.zeros(n, seq, dtype=torch.long),
        "token_turn": torch.full((n, seq), -1, dtype=torch.long),
        "rollout_log_probs": torch.zeros(n, seq),
        "turn_positions": torch.zeros(n, num_slots, turn_len, dtype=torch.long),
        "turn_position_mask": torch.zeros(n, num_slots, turn_len, dtype=torch.bool),
    }
    for i, traj in enumerate(trajectories):
        p = len(traj.prompt_ids)
        out["input_ids"][i, : traj.num_tokens] = torch.tensor(traj.prompt_ids + traj.response_ids, dtype=torch.long)
        out["attention_mask"][i, : traj.num_tokens] = 1
        out["rollout_log_probs"][i, p : traj.num_tokens] = torch.tensor(traj.response_logprobs, dtype=torch.float32)
        for turn in traj.turns:
            span = torch.arange(p + turn.start, p + turn.end)
            out["token_turn"][i, span] = turn.index
            out["turn_positions"][i, turn.index, : len(span)] = span
            out["turn_position_mask"][i, turn.index, : len(span)] = True
    sampled = out["token_turn"] >= 0
    slot = out["token_turn"].clamp(min=0)
    counted = sampled & turn_mask.gather(1, slot)
    out["response_mask"] = counted
    logprobs = out["rollout_log_probs"]
    out["rollout_log_probs"] = torch.where(sampled, logprobs, torch.zeros_like(logprobs))
    out["advantages"] = torch.where(counted, turn_adv.gather(1, slot), torch.zeros(n, seq))
    return out


def build_step_batch(
    trajectories: Sequence[Trajectory],
    cfg: AlgorithmConfig,
    pad_id: int,
    group_filter: GroupVarianceFilter[TrajectoryGroup],
    prs_rng: torch.Generator,
    max_turns: int | None = None,
) -> StepBatch:
    """This step's trajectories (plus what the filter buffered) -> a StepBatch, or a skipped one.

    `group_filter` and `prs_rng` are the caller's and change state here (buffer, skip count, draws), so a
    resumed run must restore both (`filter_state_to_json` / `generator_state_to_json`). `max_turns` fixes T;
    by default it is the most turns any trajectory has.
    """
    incoming = group_trajectories(trajectories)
    num_slots = _check([t for g in incoming + group_filter.buffered for t in g], max_turns)
    metrics = rollout_metrics(trajectories)
    scores = []
    for group in incoming:
        table = _turn_table(group, num_slots)
        counted = meaningful_turn_mask(table["reward"], table["exists"])
        scores.append(_last_existing_reward(table["reward"], table["exists"], counted))
    decision = group_filter.step(incoming, scores)
    metrics.update(decision.metrics)
    metrics["filter/skipped"] = float(decision.skipped)
    metrics["filter/forced"] = float(decision.forced)
    chosen = [t for g in decision.train for t in g]
    metrics["batch/groups"] = float(len(decision.train))
    if decision.skipped or not chosen:
        return _empty(num_slots, metrics)
    table = _turn_table(chosen, num_slots)
    turn_mask = meaningful_turn_mask(table["reward"], table["exists"])
    group_ids = [t.group_id for t in chosen]
    adv = turn_advantages(cfg.trloo.estimator, table["reward"], turn_mask, group_ids, cfg.trloo.gamma)
    prs = prs_keep_mask(table["coverage"], table["correct"], turn_mask, cfg.prs, prs_rng, speedup=table["speedup"])
    tokens = _token_tensors(chosen, turn_mask, adv, pad_id)
    n_exist, n_counted = int(table["exists"].sum()), int(turn_mask.sum())
    metrics.update(
        {
            "batch/trajectories": float(len(chosen)),
            "batch/counted_turns": float(n_counted),
            "batch/meaningful_masked_fraction": (n_exist - n_counted) / n_exist if n_exist else 0.0,
            "batch/reward_mean": float(table["reward"][turn_mask].mean()) if n_counted else 0.0,
            "batch/advantage_abs_mean": float(adv[turn_mask].abs().mean()) if n_counted else 0.0,
            "prs/turn_rejected_fraction": float((turn_mask & ~prs).sum()) / n_counted if n_counted else 0.0,
            "batch/response_tokens": float(tokens["response_mask"].sum()),
        }
    )
    return StepBatch(
        skipped=False,
        group_ids=group_ids,
        sample_ids=[(t.group_id, t.sample_index) for t in chosen],
        turn_rewards=table["reward"],
        turn_mask=turn_mask,
        turn_advantages=adv,
        prs_keep=prs,
        metrics=metrics,
        **tokens,
    )


# ---- checkpointable state -------------------------------------------------------------------------------------------
def trajectory_to_json(traj: Trajectory) -> dict[str, Any]:
    return asdict(traj)


def trajectory_from_json(data: dict[str, Any]) -> Trajectory:
    fields = dict(data)
    fields["turns"] = [Turn(**turn) for turn in fields.get("turns", [])]
    return Trajectory(**fields)


def generator_state_to_json(generator: torch.Generator) -> str:
    return base64.b64encode(generator.get_state().numpy().tobytes()).decode()


def generator_state_from_json(generator: torch.Generator, data: str) -> None:
    generator.set_state(torch.frombuffer(bytearray(base64.b64decode(data)), dtype=torch.uint8))


def filter_state_to_json(group_filter: GroupVarianceFilter[TrajectoryGroup]) -> dict[str, Any]:
    """The filter's buffer (trajectories as plain data), skip count and generator, as JSON-able values."""
    state = group_filter.state_dict()
    return {
        "buffer": [{"group": [trajectory_to_json(t) for t in g], "scores": s.tolist()} for g, s in state["buffer"]],
        "consecutive_skips": state["consecutive_skips"],
        "rng": base64.b64encode(state["rng"].numpy().tobytes()).decode(),
    }


def filter_state_from_json(group_filter: GroupVarianceFilter[TrajectoryGroup], data: dict[str, Any]) -> None:
    group_filter.load_state_dict(
        {
            "buffer": [
                ([trajectory_from_json(t) for t in e["group"]], torch.tensor(e["scores"])) for e in data["buffer"]
            ],
            "consecutive_skips": data["consecutive_skips"],
            "rng": torch.frombuffer(bytearray(base64.b64decode(data["rng"])), dtype=torch.uint8),
        }
    )
