"""What the trainer did with each trajectory of a step, per row and per turn, for outcomes.jsonl and the report.

A trajectory that reached the trainer ends one of these ways (the queue's `dropped_stale` never reaches it):

    trained        at least one of its turns carried loss tokens into the update
    filtered       its group left the step: the group-variance filter dropped it (reward std below min_std) or
                   it was an excess group (more passed than the step takes)
    buffered       its group passed but too few did: the filter holds it for a later step (the step is skipped),
                   where it is trained with the detail "from the filter's buffer of an earlier step"
    rejected_mrs   every counted turn lost its tokens to mismatch rejection; the figure is the turn's
                   geometric-mean importance ratio exp(mean(log p_train - log p_rollout))
    rejected_prs   every counted turn was dropped by profiling-based rejection; the figure is its coverage
    masked_infra   no turn was scored (the verifier gave no verdict)
    not_counted    its turns were all masked by the meaningful-turn rule or carried no sampled token
    not_stepped    it was trained, but the optimizer step did not happen (non-finite gradient norm)

Each rank decides its own rows (r, r + world, ...), so the driver merges the ranks' lists.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from drkernel.rl.step_batch import StepBatch
from drkernel.types.trajectory import Trajectory


def _filtered(trajectories: Sequence[Trajectory], chosen: set[str], skipped: bool, min_std: float) -> list[dict]:
    """Rows of the groups that left this step, with the reason the filter had."""
    by_group: dict[str, list[Trajectory]] = {}
    for traj in trajectories:
        by_group.setdefault(traj.group_id, []).append(traj)
    rows = []
    for gid, members in by_group.items():
        if gid in chosen:
            continue
        last = [next((t.reward for t in reversed(m.turns) if not t.masked), 0.0) for m in members]
        std = float(torch.tensor(last, dtype=torch.float64).std(correction=0)) if last else 0.0
        outcome = "filtered"
        if std < min_std:
            detail = f"reward std {std:.3g} < min_std {min_std:g}"
        elif skipped:
            outcome, detail = (
                "buffered",
                f"too few groups passed the filter: held for a later step (reward std {std:.3g})",
            )
        else:
            detail = f"excess group: more groups passed than the step takes (reward std {std:.3g})"
        rows += [
            {"group_id": gid, "sample_index": m.sample_index, "outcome": outcome, "detail": detail, "turns": []}
            for m in members
        ]
    return rows


def row_decisions(
    trajectories: Sequence[Trajectory],
    buffered: Sequence[Trajectory],
    batch: StepBatch,
    masks: dict[str, torch.Tensor],
    *,
    stepped: bool,
    min_std: float,
    filter_enabled: bool,
) -> list[dict[str, Any]]:
    """Every incoming trajectory's fate (the filtered ones on every rank, the trained rows of this rank's share).

    `buffered`: what the filter held from earlier steps before this one (it may be trained now); `batch` is
    this rank's share; `masks` holds what drkernel.rl.update computed for it: `unrejected` (the
    counted tokens before MRS), `loss_mask` (after MRS and PRS) and `old_log_prob`, all [N, T, L]."""
    chosen = set(batch.group_ids)
    incoming = {t.group_id for t in trajectories}
    known = {(t.group_id, t.sample_index): t for t in [*buffered, *trajectories]}
    rows = _filtered(trajectories, chosen, batch.skipped, min_std if filter_enabled else -math.inf)
    if batch.skipped or not batch.num_rows:
        return rows
    unrejected, loss_mask = masks.get("unrejected"), masks.get("loss_mask")
    if unrejected is None or loss_mask is None:  # no token survived the masks: nothing reached the update
        unrejected = loss_mask = torch.zeros(batch.turn_positions.shape, dtype=torch.bool)
    rollout = batch.to_turns(batch.rollout_log_probs)
    old = masks.get("old_log_prob", rollout)
    for i, (gid, sample) in enumerate(batch.sample_ids):
        turns, trained, mrs, prs = [], False, False, False
        traj = known.get((gid, sample))
        infra = {t.index for t in traj.turns if t.masked} if traj is not None else set()
        for slot in range(batch.turn_mask.shape[1]):
            counted = bool(batch.turn_mask[i, slot])
            tokens = unrejected[i, slot]
            if slot in infra:
                turns.append({"turn": slot, "decision": "masked_infra"})
            if not counted:
                if traj is not None and slot < len(traj.turns) and slot not in infra:  # the meaningful-turn rule
                    turns.append({"turn": slot, "decision": "not_counted"})
                continue
            if not bool(batch.prs_keep[i, slot]):
                prs = True
                verdict = (traj.turns[slot].verdict or {}) if traj is not None and slot < len(traj.turns) else {}
                turns.append({"turn": slot, "decision": "rejected_prs", "coverage": verdict.get("coverage")})
            elif tokens.any() and not loss_mask[i, slot].any():
                mrs = True
                delta = (old[i, slot] - rollout[i, slot])[tokens]
                turns.append({"turn": slot, "decision": "rejected_mrs", "ratio": float(delta.mean().exp())})
            elif loss_mask[i, slot].any():
                trained = True
                turns.append({"turn": slot, "decision": "trained", "advantage": float(batch.turn_advantages[i, slot])})
        if trained:
            outcome = "trained" if stepped else "not_stepped"
        elif mrs:
            outcome = "rejected_mrs"
        elif prs:
            outcome = "rejected_prs"
        elif traj is not None and traj.turns and len(infra) == len(traj.turns):
            outcome = "masked_infra"
        else:
            outcome = "not_counted"
        detail = "from the filter's buffer of an earlier step" if gid not in incoming else ""
        rows.append({"group_id": gid, "sample_index": sample, "outcome": outcome, "detail": detail, "turns": turns})
    return rows


def merge_rank_decisions(per_rank: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One list from every rank's: a row decided by the rank that trained it wins over the others' filter rows."""
    merged: dict[tuple[str, int], dict[str, Any]] = {}
    for rows in per_rank:
        for row in rows:
            key = (row["group_id"], row["sample_index"])
            if key not in merged or merged[key]["outcome"] in ("filtered", "buffered"):
                merged[key] = row
    return list(merged.values())
