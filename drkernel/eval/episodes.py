"""k samples of one task, each up to `rounds` x T turns, through the rollout's own episode loop.

Each round is one `drkernel.rollout.episode.run_episode` (the loop the rollout workers run: generate, extract the
last code block, verify, budgeted feedback), so an evaluation sees exactly what training sees. Sequential
test-time scaling: round r + 1 opens with the task prompt, the best kernel of the rounds so far as the assistant's
answer and the verifier's feedback on it, so the context stays bounded (one earlier kernel, never the whole
history) however many rounds run. A sample that raises or passes its time limit keeps the turns of its finished
rounds and is marked errored: the metrics count it as a failure (drkernel.eval.metrics).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from drkernel.config.train import RolloutConfig
from drkernel.data.prompts import escape_special, special_strings
from drkernel.eval.metrics import SampleRecord, TurnOutcome
from drkernel.rl.rewards import RewardConfig
from drkernel.rollout.episode import GenerateFn, VerifyFn, budgeted_feedback, run_episode
from drkernel.types.task_row import TaskRow
from drkernel.types.trajectory import Trajectory, Turn
from drkernel.types.verify_result import VerifyResult

TEXT_KEPT = 1500  # characters of the last response kept in a sample's record


def outcome(turn: Turn) -> TurnOutcome:
    """A turn as the metrics see it: no code is status "format", no verdict is "infra_error"."""
    if turn.verdict is None:
        return TurnOutcome(status="format")
    v = turn.verdict
    if v.get("status") != "ok":
        return TurnOutcome(status="infra_error")
    speedup = v.get("speedup")
    return TurnOutcome(
        status="ok",
        compiled=bool(v.get("compiled")),
        correct=bool(v.get("correct")),
        hack=v.get("hack"),
        speedup=None if speedup is None else float(speedup),
        reward=float(turn.reward),
    )


def best_turn(turns: list[Turn]) -> Turn | None:
    """The judged turn with the highest reward (the later one on a tie), None when no turn was judged."""
    judged = [t for t in turns if t.verdict is not None and not t.masked and t.code is not None]
    return max(reversed(judged), key=lambda t: t.reward) if judged else None


def continue_from(task: TaskRow, best: Turn, tokenizer: Any, cfg: RolloutConfig) -> TaskRow:
    """The task re-opened on its best kernel so far: prompt, that kernel as the answer, the feedback on it."""
    specials = special_strings(tokenizer)
    kernel = escape_special(f"```python\n{best.code}\n```", specials)
    verdict = VerifyResult.model_validate(best.verdict)
    feedback = budgeted_feedback(verdict, task.entry_point, tokenizer, cfg.feedback_max_tokens)
    prompt = [m.model_dump(mode="json") for m in task.prompt]
    opening = [*prompt, {"role": "assistant", "content": kernel}, feedback]
    return TaskRow.model_validate({**task.to_record(), "prompt": opening})


@dataclass(frozen=True)
class EpisodeSettings:
    """What every sample of an evaluation shares: the judge, the tokenizer, the episode loop's settings, how many
    scaling rounds each sample runs and how long one round may take (None: no limit)."""

    verify: VerifyFn
    tokenizer: Any
    cfg: RolloutConfig
    reward_cfg: RewardConfig
    rounds: int = 1
    timeout_s: float | None = None


async def run_sample(
    task: TaskRow, name: str, index: int, generate: GenerateFn, s: EpisodeSettings
) -> tuple[SampleRecord, list[Trajectory]]:
    """One sample: `s.rounds` episodes, each continuing from the best kernel so far; errors end it, recorded."""
    record = SampleRecord(task=name, sample=index)
    trajectories: list[Trajectory] = []
    turns: list[Turn] = []
    current = task
    for r in range(s.rounds):
        try:
            traj = await asyncio.wait_for(
                run_episode(current, f"eval:{name}:r{r}", index, generate, s.verify, s.tokenizer, s.cfg, s.reward_cfg),
                s.timeout_s,
            )
        except TimeoutError:
            record.error = f"timeout: round {r + 1} took longer than {s.timeout_s:g} s"
            break
        except Exception as e:  # a sample that breaks is a failed sample, never a dropped one
            record.error = f"{type(e).__name__}: {e}"[:500]
            break
        trajectories.append(traj)
        turns += traj.turns
        record.turns += [outcome(t) for t in traj.turns]
        best = best_turn(turns)
        if best is not None and r + 1 < s.rounds:
            current = continue_from(task, best, s.tokenizer, s.cfg)
    best = best_turn(turns)
    record.kernel = best.code if best is not None else None
    record.last_text = turns[-1].text[-TEXT_KEPT:] if turns else None
    return record, trajectories


async def run_task(
    task: TaskRow, name: str, samples: int, generate: GenerateFn, s: EpisodeSettings
) -> list[SampleRecord]:
    """The task's `samples` samples, concurrently, in sample order."""
    results = await asyncio.gather(*(run_sample(task, name, i, generate, s) for i in range(samples)))
    return [record for record, _ in results]
