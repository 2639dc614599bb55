"""Synthetic multi-turn trajectories with aligned token arrays, for the trainer's tests."""

from __future__ import annotations

from dataclasses import dataclass

from drkernel.types.trajectory import Trajectory, Turn


@dataclass
class TurnSpec:
    """What one turn sampled and how it was judged."""

    tokens: int = 3
    reward: float = 0.0
    correct: bool = False
    compiled: bool = True
    speedup: float | None = None
    coverage: float | None = None
    hack: str | None = None
    masked: bool = False  # infra_error: no verdict
    formatted: bool = True  # False: no closed code block, not verified


def make_trajectory(
    group_id: str,
    sample_index: int,
    turns: list[TurnSpec],
    prompt_len: int = 4,
    feedback_len: int = 2,
    vocab: int = 50,
    logprob: float = -1.0,
    version: int = 0,
) -> Trajectory:
    """Token ids are deterministic functions of (sample, position) below `vocab`; feedback follows every turn
    except the last."""
    prompt = [(sample_index * 7 + k) % vocab + 1 for k in range(prompt_len)]
    ids: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    built = []
    for index, spec in enumerate(turns):
        start = len(ids)
        ids += [(start + k + 3 * index + sample_index) % vocab + 1 for k in range(spec.tokens)]
        mask += [1] * spec.tokens
        logprobs += [logprob] * spec.tokens
        verdict = None
        if spec.formatted and not spec.masked:
            verdict = {
                "status": "ok",
                "compiled": spec.compiled,
                "correct": spec.correct,
                "hack": spec.hack,
                "speedup": spec.speedup,
                "coverage": spec.coverage,
            }
        elif spec.masked:
            verdict = {"status": "infra_error", "compiled": False, "correct": False, "hack": None}
        built.append(
            Turn(
                index=index,
                start=start,
                end=len(ids),
                policy_version=version,
                finish_reason="stop",
                text="x",
                code="code" if spec.formatted else None,
                verdict=verdict,
                reward=spec.reward,
                masked=spec.masked,
            )
        )
        if index < len(turns) - 1:
            ids += [2] * feedback_len
            mask += [0] * feedback_len
            logprobs += [0.0] * feedback_len
    return Trajectory(
        group_id=group_id,
        sample_index=sample_index,
        task_uid=group_id.split("#")[0],
        prompt_ids=prompt,
        response_ids=ids,
        response_mask=mask,
        response_logprobs=logprobs,
        turns=built,
        end_reason="max_turns",
    )
