"""The job's dashboard series: set by the actor that owns the number, tagged with the run, served by the node's
metrics endpoint; and the shipped Grafana dashboard plots exactly these series."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
import pytest

from serve_apps.runtime.run_series import POLICY_SERIES, QUEUE_SERIES, TRAINER_SERIES, WORKER_SERIES

REPO = Path(__file__).resolve().parents[3]


def scrape_until(url: str, pattern: str, timeout_s: float = 90.0) -> str:
    """The node's Prometheus text once a line matches `pattern` (the agent exports every second or so)."""
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        text = httpx.get(url, timeout=10).text
        if re.search(pattern, text, re.MULTILINE):
            return text
        time.sleep(1)
    found = sorted({line.split("{")[0] for line in text.splitlines() if line.startswith("ray_drkernel")})
    raise AssertionError(f"no line matching {pattern!r} in {url}; drkernel series there: {found}")


@pytest.mark.integration
def test_the_queue_exports_its_depth_and_admissions_tagged_with_the_run(ray_cluster):
    import ray

    from actors.trajectory_queue import TrajectoryQueue
    from drkernel.config.train import QueueConfig

    queue = TrajectoryQueue.remote(QueueConfig(groups_per_step=2, max_staleness=1), 1, None, "metrics-run-a")
    try:
        assert ray.get(queue.try_admit.remote("w0")) is not None
        assert ray.get(queue.try_admit.remote("w0")) is not None
        text = scrape_until(ray_cluster["metrics_url"], r'^ray_drkernel_queue_running\{.*run="metrics-run-a".*\} 2\.0')
        assert re.search(r'^ray_drkernel_queue_enqueued\{.*run="metrics-run-a".*\} 2\.0', text, re.MULTILINE)
    finally:
        ray.kill(queue)


@pytest.mark.integration
def test_a_rollout_worker_exports_its_groups_tagged_with_the_run_and_its_id(ray_cluster, tmp_path):
    import ray
    from rollout_support import FakePolicy, SlowVerifier, toy_episode, write_pool

    from actors.prompt_source import PromptSource
    from actors.rollout_pool import worker_factory
    from actors.trajectory_queue import TrajectoryQueue
    from drkernel.config.train import QueueConfig, RolloutConfig

    source = PromptSource.remote(str(write_pool(tmp_path / "pool.parquet", 2)), seed=1, num_epochs=1)
    queue = TrajectoryQueue.remote(QueueConfig(groups_per_step=1, max_staleness=4), 1, source)
    policy, verifier = FakePolicy.remote(1), SlowVerifier.remote(1, slow_p=0.0, fast_s=0.01)
    rollout = RolloutConfig(num_workers=1, groups_per_worker=1, samples_per_prompt=2, max_turns=1)
    factory = worker_factory(queue, source, policy, verifier, None, rollout, None, toy_episode, run="metrics-run-w")
    worker = factory("w-metrics")
    try:
        stats = ray.get(worker.run.remote(), timeout=120)  # both prompts, then out of prompts
        assert stats["groups"] == 2
        text = scrape_until(ray_cluster["metrics_url"], r'^ray_drkernel_worker_groups\{.*run="metrics-run-w".*\} 2\.0')
        samples = re.search(r'^ray_drkernel_worker_samples\{(.*run="metrics-run-w".*)\} (\S+)', text, re.MULTILINE)
        assert samples and 'worker="w-metrics"' in samples.group(1) and float(samples.group(2)) == 4.0
    finally:
        for actor in (worker, queue, source, policy, verifier):
            ray.kill(actor)


def test_the_grafana_dashboard_plots_every_series_and_only_those():
    dashboard = json.loads((REPO / "grafana" / "drkernel_dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    plotted = {re.sub(r"_(total|bucket)$", "", m) for e in exprs for m in re.findall(r"ray_drkernel_(\w+)", e)}
    shipped = {
        f"{role}_{key}"
        for role, s in (
            ("queue", QUEUE_SERIES),
            ("trainer", TRAINER_SERIES),
            ("policy", POLICY_SERIES),
            ("worker", WORKER_SERIES),
        )
        for key in s
    }
    verifier = {"verifier_verdicts", "verifier_latency_s", "verifier_queue_depth"}
    assert plotted - verifier == shipped
    assert all('run=~"$run"' in e for e in exprs if "verifier" not in e.lower())
