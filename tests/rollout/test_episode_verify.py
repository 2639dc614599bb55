"""run_episode against the real verifier (Triton interpreter on CPU, in a thread as the Serve replica runs it):
a shipped solution is accepted and priced, a broken one is rejected and the feedback says why."""

from __future__ import annotations

import asyncio

import pytest
from episode_support import Reply, ScriptedEngine, fenced, rollout_cfg, task_row

from drkernel.rl.rewards import RewardConfig
from drkernel.rollout.episode import run_episode
from drkernel.verify import Verifier, VerifyOptions

pytestmark = pytest.mark.integration

OPTIONS = VerifyOptions(
    device="cpu", num_correct_trials=1, measure_performance=False, measure_coverage=False, timeout_s=120
)


@pytest.fixture(scope="module")
def verifier():
    with Verifier(device="cpu", max_concurrency=2) as v:
        yield v


def test_shipped_solution_is_accepted_then_a_broken_one_rejected(tasks, tokenizer, verifier):
    task = tasks["add"]
    good = task.solutions["simple"]
    broken = good.replace("a + b, mask=mask", "a - b, mask=mask")
    assert broken != good

    async def verify(reference: str, candidate: str, entry_point: str):
        options = OPTIONS.model_copy(update={"entry_point": entry_point})
        return await asyncio.to_thread(verifier.verify, reference, candidate, options)

    engine = ScriptedEngine(tokenizer, [Reply(fenced(good)), Reply(fenced(broken))])
    traj = asyncio.run(
        run_episode(task_row(task.reference), "g", 0, engine, verify, tokenizer, rollout_cfg(), RewardConfig())
    )
    first, second = traj.turns
    assert first.code == good.strip("\n") and first.correct and first.verdict["compiled"]
    assert first.reward == pytest.approx(0.5)  # correct, no timing, no coverage measured
    assert "status: accepted" in first.feedback
    assert second.code == broken.strip("\n") and not second.correct and second.reward == 0.0
    assert second.verdict["error"]["kind"] == "output_mismatch"
    assert traj.end_reason == "max_turns" and not any(t.masked for t in traj.turns)
    assert traj.metrics["verify_calls"] == 2 and traj.metrics["verify_s"] > 0
    traj.check_aligned()
