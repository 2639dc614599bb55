"""Sequential test-time scaling: a round re-opens the task on the best kernel so far, with bounded context."""

from __future__ import annotations

from drkernel.config.train import RolloutConfig
from drkernel.eval.episodes import best_turn, continue_from, outcome
from drkernel.eval.tasks import load_tasks
from drkernel.model.tokenizer import build_tokenizer
from drkernel.types.trajectory import Turn
from drkernel.types.verify_result import VerifyResult


def turn(index: int, code: str | None, reward: float, correct: bool = True) -> Turn:
    verdict = None if code is None else VerifyResult(compiled=True, correct=correct, speedup=1.3)
    t = Turn(index, 0, 0, 0, "stop", "", code, verdict=None if verdict is None else verdict.model_dump(mode="json"))
    t.reward = reward
    return t


def test_the_best_judged_turn_seeds_the_next_round_and_nothing_else():
    turns = [turn(0, "first", 1.2), turn(1, None, 0.0), turn(2, "best", 1.6), turn(3, "wrong", 0.0, correct=False)]
    best = best_turn(turns)
    assert best is not None and best.code == "best"
    assert best_turn([turn(0, None, 0.0)]) is None
    assert [outcome(t).status for t in turns] == ["ok", "format", "ok", "ok"]
    tok = build_tokenizer(["```python\\nbest\\n```\\n", "def f(): pass\\n"] * 3, vocab_size=300)
    ((_, task),) = load_tasks(None, ["add"])
    reopened = continue_from(task, best, tok, RolloutConfig())
    roles = [m.role for m in reopened.prompt]
    assert roles == [*[m.role for m in task.prompt], "assistant", "user"]  # one earlier kernel, never the history
    assert "best" in reopened.prompt[-2].content and "first" not in reopened.prompt[-2].content
    assert "speedup: 1.30x" in reopened.prompt[-1].content  # the verifier's feedback on that kernel
    assert reopened.reference_code == task.reference_code and reopened.task_uuid == task.task_uuid
