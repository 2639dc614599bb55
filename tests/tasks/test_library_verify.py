"""The real verifier (CPU, Triton interpreter) accepts every shipped solution of every task.

All evaluations go through one Verifier, two at a time, in a module fixture; each (task, solution)
then gets its own test so a failure names the task and carries the verifier's error. No timing
ordering is asserted: interpreter wall time says nothing about GPU speed.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from drkernel.config.verifier import VerifyOptions
from drkernel.rl.rewards import score
from drkernel.tasks import load_tasks
from drkernel.types.verify_result import VerifyResult
from drkernel.verify.engine import Verifier

TASKS = {t.name: t for t in load_tasks()}
SOLUTIONS = [(name, label) for name, t in TASKS.items() for label in sorted(t.solutions)]
OPTIONS = VerifyOptions(device="cpu", num_perf_trials=2, num_warmup=1, timeout_s=120)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def verdicts() -> dict[tuple[str, str], VerifyResult]:
    with Verifier(device="cpu", max_concurrency=2) as verifier:

        def run(key: tuple[str, str]) -> VerifyResult:
            task = TASKS[key[0]]
            return verifier.verify(task.reference, task.solutions[key[1]], OPTIONS)

        with ThreadPoolExecutor(max_workers=2) as pool:
            return dict(zip(SOLUTIONS, pool.map(run, SOLUTIONS)))


@pytest.mark.parametrize(("name", "label"), SOLUTIONS)
def test_solution_is_accepted(verdicts: dict[tuple[str, str], VerifyResult], name: str, label: str):
    result = verdicts[(name, label)]
    summary = f"{name}/{label}: error={result.error} hack={result.hack}"
    assert result.status == "ok", summary
    assert result.compiled and result.correct, summary
    assert result.hack is None, summary
    assert result.error is None, summary
    assert score(result) > 0, summary
