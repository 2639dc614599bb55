"""The job's verifier is the Serve app of `drkernel serve verifier`, autoscaled on ongoing requests: a bounded
burst from several callers in the cluster (as rollout workers call it) grows it from 1 to 3 replicas, idleness
shrinks it back to 1, and every evaluation of the burst comes back exactly once with its own verdict."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest
import ray
from ray import serve
from serve_test_support import FAST_OPTIONS, code

pytestmark = pytest.mark.integration

BURST = 18  # evaluations: 3 callers x 6 at once
CALLERS = 3


ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import a test module


@ray.remote(num_cpus=0)
def _caller(app_name: str, first: int, count: int, codes: dict[str, str], options: dict) -> list[tuple[int, bool]]:
    """One rollout-worker-like caller: `count` concurrent evaluations through the deployment handle; odd
    numbers send a wrong kernel, so each answer can be matched to its request."""
    from serve_apps.verifier import verifier_handle

    handle = verifier_handle(app_name)
    reference = codes["reference_add"]

    async def one(i: int) -> tuple[int, bool]:
        kernel = codes["wrong_add" if i % 2 else "honest_add"] + f"\n# evaluation {i}\n"
        result = await handle.verify.remote(reference, kernel, options)
        assert result.status == "ok", result
        return i, bool(result.correct)

    async def all_of_them() -> list[tuple[int, bool]]:
        return list(await asyncio.gather(*(one(i) for i in range(first, first + count))))

    return asyncio.run(all_of_them())


def _replicas(app_name: str) -> int:
    """Running replicas of the app's Verifier deployment."""
    app = serve.status().applications.get(app_name)
    if app is None:
        return 0
    deployment = app.deployments["Verifier"]
    return deployment.replica_states.get("RUNNING", 0)


def _wait_for(app_name: str, want: int, timeout_s: float, seen: list[int]) -> None:
    deadline = time.monotonic() + timeout_s
    while (n := _replicas(app_name)) != want:
        seen.append(n)
        assert time.monotonic() < deadline, f"verifier replicas {seen[-20:]}, never {want} in {timeout_s:.0f} s"
        time.sleep(0.5)
    seen.append(n)


def test_the_jobs_verifier_grows_under_a_burst_and_shrinks_when_idle(ray_cluster, tmp_path):
    from actors.job import TrainJob
    from drkernel.config.base import load_config
    from drkernel.config.train import TrainConfig

    cfg = load_config(
        TrainConfig,
        None,
        [
            f"trainer.output_dir={tmp_path / 'run'}",
            "verifier.app_name=autoscale-verifier",
            "verifier.cpus_per_replica=0",
            "verifier.max_concurrency=1",
            "verifier.max_ongoing_requests=2",
            "verifier.autoscaling.min_replicas=1",
            "verifier.autoscaling.max_replicas=3",
            "verifier.autoscaling.target_ongoing_requests=1",
            "verifier.autoscaling.upscale_delay_s=0",
            "verifier.autoscaling.downscale_delay_s=2",
        ],
    )
    job = TrainJob(cfg)
    try:
        job._deploy_verifier()
        seen: list[int] = []
        _wait_for("autoscale-verifier", 1, 120, seen)
        options = {**FAST_OPTIONS, "num_correct_trials": 1, "measure_performance": False, "measure_coverage": False}
        per = BURST // CALLERS
        codes = {name: code(name) for name in ("reference_add", "honest_add", "wrong_add")}
        calls = [_caller.remote("autoscale-verifier", c * per, per, codes, options) for c in range(CALLERS)]
        _wait_for("autoscale-verifier", 3, 240, seen)
        answers = [a for batch in ray.get(calls, timeout=600) for a in batch]
        _wait_for("autoscale-verifier", 1, 240, seen)
    finally:
        job.cleanup()
    assert sorted(i for i, _ in answers) == list(range(BURST))  # none lost, none twice
    assert all(correct == (i % 2 == 0) for i, correct in answers)  # each verdict is its own request's
    assert "autoscale-verifier" not in serve.status().applications
