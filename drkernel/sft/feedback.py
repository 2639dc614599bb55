"""Second-turn SFT pairs from real verdicts: a task's simple solution, the verifier's feedback on it, then the
fused solution.

RL episodes run several turns; a warm start that saw only first turns answers a feedback turn with no code at
all (the demo's second turns were empty). These pairs show the policy what the second turn is for. The feedback
is what the verifier really said about the simple solution, rendered by the same `feedback_message` the
rollout uses; nothing in it is written by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from drkernel.config.verifier import VerifyOptions
from drkernel.data.prompts import feedback_message, first_turn_messages
from drkernel.log import get_logger, progress
from drkernel.sft.data import ChatPair, code_response
from drkernel.tasks.loader import Task
from drkernel.verify.engine import Verifier

_log = get_logger("sft")
FIRST, BETTER = "simple", "fused"  # the solution labels of the shipped library: the first answer, the improved one


def feedback_options(num_correct_trials: int, timeout_s: float) -> VerifyOptions:
    """CPU verification with modelled speed: interpreter wall time would tell the policy nothing about speed."""
    return VerifyOptions(device="cpu", timing="cpu_model", num_correct_trials=num_correct_trials, timeout_s=timeout_s)


def feedback_pairs(
    tasks: Sequence[Task],
    style: str,
    options: VerifyOptions,
    concurrency: int = 2,
    log: Callable[[str], None] = _log.info,
) -> list[ChatPair]:
    """One pair per task holding both a simple and a fused solution: prompt = first turn, the simple solution as
    the assistant's answer, the verifier's feedback on it; response = the fused solution. A task whose simple
    solution gets no verdict (infra_error) is left out and named in the log."""
    chosen = [t for t in tasks if FIRST in t.solutions and BETTER in t.solutions]
    if not chosen:
        return []
    with Verifier(device="cpu", max_concurrency=concurrency) as verifier, ThreadPoolExecutor(concurrency) as pool:
        jobs = pool.map(lambda t: verifier.verify(t.reference, t.solutions[FIRST], options), chosen)
        verdicts = list(progress(jobs, total=len(chosen), desc="feedback verdicts"))
    pairs, skipped = [], []
    for task, verdict in zip(chosen, verdicts, strict=True):
        if verdict.status != "ok":
            skipped.append(task.name)
            continue
        messages = [
            *first_turn_messages(task.reference, entry_point="Model", style=style),
            {"role": "assistant", "content": code_response(task.solutions[FIRST])},
            feedback_message(verdict),
        ]
        pairs.append(ChatPair(messages, code_response(task.solutions[BETTER]), f"{task.name}/{FIRST}->{BETTER}"))
    if skipped:
        log(f"feedback turns: no verdict for {', '.join(skipped)} (infra_error); their second turns are left out")
    return pairs
