"""What the driver learns about a training batch it never holds: ids, version lags, token and verifier
counts, one outcome row per trajectory, and the full turns of a few trajectories for humans. The trainer
computes it where the batch is (the trainer pulls its batches from the queue), so no token arrays cross the
driver.

`trajectories` (every trajectory, small) feed outcomes.jsonl; `samples` (up to logging.report_samples_per_step,
whole turns) feed samples.jsonl; both feed report.html (pipelines/report.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drkernel.types.group import FinishedGroup
from drkernel.types.trajectory import Trajectory, Turn

VERDICT_KEYS = ("status", "compiled", "correct", "hack", "speedup", "coverage", "runtime_ms", "ref_runtime_ms")


def turn_category(turn: Turn) -> str:
    """What the verifier made of a turn, in the words the report filters by."""
    verdict = turn.verdict or {}
    if turn.masked:
        return "infra"
    if turn.code is None:
        return "format_failure"
    if verdict.get("hack"):
        return f"hack:{verdict['hack']}"
    if turn.correct:
        return "correct"
    return "wrong" if verdict.get("compiled") else "compile_error"


def _verdict(turn: Turn) -> dict[str, Any]:
    verdict = turn.verdict or {}
    error = verdict.get("error") or {}
    return {k: verdict.get(k) for k in VERDICT_KEYS} | {
        "error": error.get("kind"),
        "error_message": error.get("message"),
    }


def trajectory_summary(group: FinishedGroup, traj: Trajectory) -> dict[str, Any]:
    """One trajectory's outcome row: ids, versions and per turn its category, reward, speedup."""
    return {
        "group_id": group.group_id,
        "sample_index": traj.sample_index,
        "task_uid": group.task_uid,
        "end_reason": traj.end_reason,
        "min_version": traj.min_version,
        "turns": [
            {
                "turn": t.index,
                "category": turn_category(t),
                "reward": t.reward,
                "masked": t.masked,
                "speedup": (t.verdict or {}).get("speedup"),
            }
            for t in traj.turns
        ],
    }


def _cut(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters cut at logging.sample_text_chars]"


def trajectory_record(
    group: FinishedGroup, traj: Trajectory, decode: Callable[[list[int]], str] | None, limit_chars: int
) -> dict[str, Any]:
    """A whole trajectory for humans: the prompt as the policy saw it, and per turn the response, the kernel,
    the verdict, the reward and the feedback that followed."""
    turns = []
    for t in traj.turns:
        turns.append(
            {
                "turn": t.index,
                "version": t.policy_version,
                "category": turn_category(t),
                "reward": t.reward,
                "masked": t.masked,
                "finish_reason": t.finish_reason,
                "response": _cut(t.text, limit_chars),
                "kernel": _cut(t.code, limit_chars),
                "feedback": _cut(t.feedback, limit_chars),
                "verdict": _verdict(t),
            }
        )
    return {
        "group_id": group.group_id,
        "sample_index": traj.sample_index,
        "task_uid": group.task_uid,
        "end_reason": traj.end_reason,
        "prompt": _cut(decode(traj.prompt_ids), limit_chars) if decode is not None else None,
        "turns": turns,
    }


def pick_samples(groups: list[FinishedGroup], count: int) -> list[tuple[FinishedGroup, Trajectory]]:
    """Up to `count` trajectories spread over the groups: every group's first sample, then every second, ..."""
    picked: list[tuple[FinishedGroup, Trajectory]] = []
    depth = max((len(g.trajectories) for g in groups), default=0)
    for k in range(depth):
        for g in groups:
            if len(picked) == count:
                return picked
            if k < len(g.trajectories):
                picked.append((g, g.trajectories[k]))
    return picked


def batch_report(
    groups: list[FinishedGroup],
    samples: int = 0,
    decode: Callable[[list[int]], str] | None = None,
    limit_chars: int = 20000,
) -> dict[str, Any]:
    """The batch's group ids and oldest versions, its token and verifier totals, every trajectory's outcome row
    and `samples` whole trajectories."""
    trajectories = [t for g in groups for t in g.trajectories]
    verified = sum(1 for traj in trajectories for t in traj.turns if t.verdict is not None)
    return {
        "group_ids": [g.group_id for g in groups],
        "min_versions": [g.min_version for g in groups],
        "tokens": sum(t.end - t.start for traj in trajectories for t in traj.turns),
        "verifier_calls": verified,
        "verify_s": sum(traj.metrics.get("verify_s", 0.0) for traj in trajectories),
        "verify_wait_s": sum(traj.metrics.get("verify_wait_s", 0.0) for traj in trajectories),
        "generate_s": sum(traj.metrics.get("generate_s", 0.0) for traj in trajectories),
        "trajectories": [trajectory_summary(g, t) for g in groups for t in g.trajectories],
        "samples": [trajectory_record(g, t, decode, limit_chars) for g, t in pick_samples(groups, samples)],
    }
