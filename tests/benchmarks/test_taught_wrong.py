"""The learning experiment's taught-wrong answers (`benchmarks/learning.py --taught-wrong`): each runs
and is judged wrong by the real verifier, not flagged as a hack, and the recipe puts it beside the shipped answers
only when asked. A taught-wrong answer that was in fact correct would make the experiment's correct rate a lie."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from drkernel.tasks.loader import load_task
from drkernel.verify import Verifier, VerifyOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from learning import TAUGHT_WRONG, recipe

pytestmark = pytest.mark.integration

TASKS = sorted(TAUGHT_WRONG)
CHEAP = VerifyOptions(device="cpu", num_correct_trials=1, measure_performance=False, measure_coverage=False)


def test_the_recipe_adds_the_wrong_answer_only_when_asked(tmp_path: Path):
    recipe(tmp_path, TASKS, epochs=1, taught_wrong=True)
    for name in TASKS:
        assert sorted(load_task(tmp_path / "tasks" / name).solutions) == ["fused", "simple", "wrong"]
    recipe(tmp_path, TASKS, epochs=1)
    for name in TASKS:
        assert sorted(load_task(tmp_path / "tasks" / name).solutions) == ["fused", "simple"]


def test_an_unknown_task_is_refused_by_name(tmp_path: Path):
    with pytest.raises(SystemExit, match="no wrong answer for add"):
        recipe(tmp_path, ["add"], epochs=1, taught_wrong=True)


def test_every_taught_wrong_answer_runs_and_is_judged_wrong_beside_the_right_ones(tmp_path: Path):
    recipe(tmp_path, TASKS, epochs=1, taught_wrong=True)
    assert TASKS == ["relu", "scale_shift"]
    with Verifier(device="cpu", max_concurrency=1) as verifier:
        for name in TASKS:
            task = load_task(tmp_path / "tasks" / name)
            for label, source in sorted(task.solutions.items()):
                r = verifier.verify(task.reference, source, CHEAP)
                assert r.status == "ok" and r.compiled and r.hack is None, (name, label, r.error)
                assert r.correct == (label != "wrong"), (name, label)
