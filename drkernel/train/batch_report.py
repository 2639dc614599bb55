"""What the driver learns about a training batch it never holds: ids, version lags, token and verifier
counts, and a few trajectories for humans. The trainer computes it where the batch is (the trainer pulls
its batches from the queue), so no trajectory bytes cross the driver."""

from __future__ import annotations

from typing import Any

from drkernel.rollout.group import FinishedGroup


def group_sample(group: FinishedGroup, limit_chars: int = 2000) -> dict[str, Any]:
    """One trajectory of a group, per turn: kernel, feedback, verdict summary, reward (for humans)."""
    traj = group.trajectories[0]
    turns = []
    for t in traj.turns:
        verdict = t.verdict or {}
        turns.append(
            {
                "turn": t.index,
                "version": t.policy_version,
                "reward": t.reward,
                "masked": t.masked,
                "kernel": (t.code or "")[:limit_chars],
                "feedback": (t.feedback or "")[:limit_chars],
                "verdict": {k: verdict.get(k) for k in ("status", "compiled", "correct", "hack", "speedup", "coverage")}
                | {"error": (verdict.get("error") or {}).get("kind")},
            }
        )
    return {"group_id": group.group_id, "task_uid": group.task_uid, "end_reason": traj.end_reason, "turns": turns}


def batch_report(groups: list[FinishedGroup], samples: int = 0) -> dict[str, Any]:
    """The batch's group ids and oldest versions, its token and verifier totals, and `samples` group samples."""
    trajectories = [t for g in groups for t in g.trajectories]
    verified = sum(1 for traj in trajectories for t in traj.turns if t.verdict is not None)
    return {
        "group_ids": [g.group_id for g in groups],
        "min_versions": [g.min_version for g in groups],
        "tokens": sum(t.end - t.start for traj in trajectories for t in traj.turns),
        "verifier_calls": verified,
        "verify_s": sum(traj.metrics.get("verify_s", 0.0) for traj in trajectories),
        "samples": [group_sample(g) for g in groups[:samples]],
    }
