"""Second-turn SFT pairs: real verdicts on the simple solutions, rendered as the rollout renders feedback."""

from __future__ import annotations

import pytest

from drkernel.config.verifier import VerifyOptions
from drkernel.data.prompts import extract_code, feedback_message, first_turn_messages
from drkernel.sft.feedback import feedback_options, feedback_pairs
from drkernel.tasks import load_tasks
from drkernel.verify import Verifier


@pytest.mark.integration
def test_pairs_carry_the_verifiers_own_feedback_on_the_simple_solution():
    tasks = [t for t in load_tasks(categories=["elementwise"]) if t.name in ("add", "relu")]
    options = feedback_options(num_correct_trials=1, timeout_s=120)
    logged: list[str] = []
    pairs = feedback_pairs(tasks, "compact", options, concurrency=2, log=logged.append)
    assert [p.source for p in pairs] == ["add/simple->fused", "relu/simple->fused"] and not logged
    with Verifier(device="cpu", max_concurrency=1) as v:
        for task, pair in zip(tasks, pairs, strict=True):
            first = first_turn_messages(task.reference, entry_point="Model", style="compact")
            assert pair.messages[: len(first)] == first
            answer, feedback = pair.messages[len(first) :]
            assert answer["role"] == "assistant" and extract_code(answer["content"]) == task.solutions["simple"].strip()
            assert extract_code(pair.response) == task.solutions["fused"].strip()
            again = v.verify(task.reference, task.solutions["simple"], options)
            assert again.correct and again.timing_source == "cpu_model"
            assert feedback == feedback_message(again)  # the verifier's verdict, as the rollout words it
            assert "correct: yes" in feedback["content"] and "speedup:" in feedback["content"]


def test_options_model_speed_on_the_cpu():
    options = feedback_options(num_correct_trials=2, timeout_s=60)
    assert isinstance(options, VerifyOptions) and options.device == "cpu" and options.timing == "cpu_model"
    assert options.num_correct_trials == 2 and options.timeout_s == 60
