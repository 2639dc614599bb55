"""The whole training job on the session's Ray cluster: every actor, real Serve apps, the real verifier.

Marked integration; smallest settings (2 tasks, 2 samples, 2 turns, 2 groups per step, 2 steps).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from drkernel.config.base import load_config
from drkernel.config.train import TrainConfig

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def _cfg(overrides: list[str], *extra: str) -> TrainConfig:
    return load_config(TrainConfig, None, [*overrides, *extra])


def _scrape_until(url: str, pattern: str, timeout_s: float = 300.0) -> str:
    """The node's Prometheus text once a line matches `pattern` (the agent exports about every second)."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while not re.search(pattern, text := httpx.get(url, timeout=10).text, re.MULTILINE):
        assert time.monotonic() < deadline, f"nothing matches {pattern!r} at {url}"
        time.sleep(1)
    return text


def _forkservers() -> set[int]:
    import psutil

    found = set()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if ("multiprocessing.forkserver" in cmd and "drkernel.verify" in cmd) or "PolicyReplica" in cmd:
            found.add(proc.info["pid"])
    return found


ACCESS_LINE = re.compile(r" -- (CALL|GET|POST) \S+ \S+ [\d.]+ms$", re.MULTILINE)  # Serve: `CALL verify OK 9.3ms`


def _serve_replica_logs(app: str) -> list[Path]:
    """Ray Serve's log files of the replicas of `app` in this test session's cluster."""
    import ray

    logs = Path(ray._private.worker._global_node.get_logs_dir_path()) / "serve"
    return sorted(logs.glob(f"replica_{app}_*.log"))


def _files(folder: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def _check_records_and_report(run: Path, rows: list[dict], summary: dict) -> None:
    """Every trajectory's outcome per step, the whole turns of the sampled ones, and report.html over both: it parses,
    holds every record it claims, shows kernel text (`mask = offsets < n`) as data, and loads nothing."""
    from html.parser import HTMLParser

    from pipelines.report import write_report

    outcomes = [json.loads(line) for line in (run / "outcomes.jsonl").read_text().splitlines()]
    judged = [o for o in outcomes if o["outcome"] not in ("dropped_stale", "failed")]
    assert len(judged) == summary["trajectories"]  # one line per trajectory the trainer got, none twice
    assert len({(o["step"], o["group_id"], o["sample_index"]) for o in judged}) == len(judged)
    assert {o["outcome"] for o in judged} <= {"trained", "rejected_mrs", "not_counted", "masked_infra", "not_stepped"}
    assert any(o["outcome"] == "trained" for o in judged)
    for step in (1, 2):
        counted = sum(v for k, v in rows[step].items() if k.startswith("outcomes/"))
        assert counted == sum(1 for o in outcomes if o["step"] == step), rows[step]
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == summary["trajectories"]  # report_samples_per_step=8 keeps all 4 a step whole
    for s in samples:
        assert s["prompt"] and s["outcome"] in {o["outcome"] for o in judged} and s["turns"]
        for t in s["turns"]:
            assert {"kernel", "feedback", "verdict", "reward", "category", "response", "decision"} <= set(t)

    text = write_report(run, "finished").read_text()
    tags: list[tuple[str, dict]] = []
    scripts: dict[str, str] = {}

    class Page(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.append((tag, dict(attrs)))

        def handle_data(self, data):
            if tags and tags[-1][0] == "script":
                scripts[tags[-1][1].get("id", "code")] = scripts.get(tags[-1][1].get("id", "code"), "") + data

    Page().feed(text)
    assert [t for t, _ in tags].count("script") == 2
    assert all(v.startswith("data:") for _, a in tags for k, v in a.items() if k in ("src", "href"))
    data = json.loads(scripts["report-data"])
    assert [{k: v for k, v in s.items() if k != "task"} for s in data["samples"]] == samples
    assert len(data["outcomes"]) == len(outcomes) and {s["task"] for s in data["samples"]} <= {"add", "relu"}
    assert [r["step"] for r in data["metrics"]] == [0, 1, 2] and data["config"]["trainer"]["total_steps"] == 2
    kernels = [t["kernel"] for s in samples for t in s["turns"] if t["kernel"] and "<" in t["kernel"]]
    assert all(k not in text for k in kernels)  # a kernel's `<` never reaches the page as markup
    assert "<img" in text  # the plots, inline


def test_job_runs_every_actor_and_pushes_bit_identical_weights(ray_cluster, tiny_recipe, tmp_path):
    from ray import serve

    from actors.job import TrainJob
    from serve_apps.policy import policy_handle

    root, overrides = tiny_recipe
    apps = ["policy.app_name=quiet-policy", "policy.route_prefix=/quiet-policy", "verifier.app_name=quiet-verifier"]
    validation = [f"validation.{k}" for k in ("every_steps=2", "samples_per_task=1", "max_turns=1", "tasks=[add]")]
    cfg = _cfg(overrides, f"trainer.output_dir={tmp_path / 'run'}", "policy.num_replicas=2", *apps, *validation)
    before = _forkservers()
    warm_start = _files(root / "sft")
    job = TrainJob(cfg, allow_sft=False)  # the checkpoint exists: an SFT would be refused (SFTRequired)
    try:
        job.setup()
        job.run()
        trainer_sum = __import__("ray").get(job.ranks[0].checksum.remote())
        replica_sums = policy_handle(cfg.policy.app_name).broadcast("state_checksum").results(timeout_s=180)
        versions = policy_handle(cfg.policy.app_name).broadcast("version").results(timeout_s=180)
        # the actors' own dashboard series, tagged with the run (its folder's name), on the node's endpoint
        exported = _scrape_until(ray_cluster["metrics_url"], r'^ray_drkernel_trainer_version\{.*run="run".*\} 2\.0')
    finally:
        job.cleanup()
    for series in (
        "trainer_grad_norm",
        "trainer_step_seconds",
        "policy_batch_size",
        "policy_tokens",
        "queue_consumed",
        "worker_groups",
    ):
        assert re.search(rf'^ray_drkernel_{series}\{{.*run="run"', exported, re.MULTILINE), series
    summary = job.summary(0.0)
    assert summary["steps"] == 2 and summary["policy_versions"] == 2
    assert summary["sft_wall_s"] == 0.0 and _files(root / "sft") == warm_start  # no SFT ran, nothing rewritten
    replica_logs = _serve_replica_logs("quiet-verifier") + _serve_replica_logs("quiet-policy")
    assert len(replica_logs) >= 3  # one verifier and two policy replicas wrote Serve logs ...
    for log in replica_logs:  # ... but not a line per request (the verifier alone answered dozens)
        assert not ACCESS_LINE.search(log.read_text()), log
    assert len(replica_sums) == 2 and set(replica_sums) == {trainer_sum}  # every replica bit-identical
    assert versions == [2, 2]
    assert summary["trajectories"] == 2 * 2 * 2  # steps x groups x samples
    assert summary["verifier_calls"] > 0, "the policy wrote no closed code block in 8 trajectories"
    assert summary["max_staleness_observed"] <= cfg.queue.max_staleness
    assert len(summary["trained_group_ids"]) == 4 and len(set(summary["trained_group_ids"])) == 4
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]  # step 0: the held-out validation before any training
    assert "val/fast@0" in rows[0] and "val/fast@0/turn1" in rows[2] and "val/compile_rate" in rows[2]
    assert not any(k.startswith("val/") for k in rows[1])  # every 2 steps, not every step
    for key in (
        "rollout/reward_mean",
        "rollout/correct_rate",
        "rollout/fast1",
        "rollout/compile_rate",
        "rollout/format_rate",
        "rollout/hack_rate",
        "staleness/max",
        "queue/ready",
        "train/grad_norm",
        "train/clip_fraction",
        "train/entropy",
        "throughput/tokens_per_s",
        "rollout/verifier_s_per_call",
        "rollout/response_length_mean",
        "weight_sync/total_s",
        "data/rows_too_long",
    ):
        assert key in rows[-1], key
    assert (tmp_path / "run" / "checkpoints").is_dir()
    _check_records_and_report(tmp_path / "run", rows, summary)
    apps = serve.status().applications
    assert cfg.policy.app_name not in apps and cfg.verifier.app_name not in apps
    deadline = time.monotonic() + 120  # a loaded 2-core box takes its time to reap a killed replica's children
    while _forkservers() - before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not (_forkservers() - before), "fork-servers or engines outlived the job"


def test_a_killed_job_resumes_where_an_unbroken_run_ends(ray_cluster, tiny_recipe, tmp_path):
    """Synchronous mode (max_staleness 0): the trained groups are a function of the prompt order alone, so
    the killed-and-resumed run must train exactly the unbroken run's groups, reach the same step, version
    and prompt cursor."""
    import ray

    from actors.job import TrainJob

    root, overrides = tiny_recipe
    common = [*overrides, "queue.max_staleness=0", "trainer.total_steps=3", "trainer.checkpoint_every=1"]
    unbroken = TrainJob(_cfg(common, f"trainer.output_dir={tmp_path / 'a'}")).main()

    killed_dir = tmp_path / "b"
    address = ray.get_runtime_context().gcs_address
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipelines.train",
            "--address",
            address,
            "--no-sft",
            *common,
            f"trainer.output_dir={killed_dir}",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        deadline = time.monotonic() + 600
        while not (killed_dir / "checkpoints" / "step_00000002").exists():
            assert proc.poll() is None, f"the run to be killed ended early: {proc.stderr.read()[-3000:]}"
            assert time.monotonic() < deadline, "no checkpoint of step 2 within 10 minutes"
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    reports: list[str] = []  # the run's report is rewritten when it resumes and when it ends
    resumed = TrainJob(
        _cfg(common, f"trainer.output_dir={killed_dir}"), resume=True, on_report=lambda _, s: reports.append(s)
    ).main()
    assert len(reports) == 2 and reports[0].startswith("resumed at step ") and reports[1] == "finished: 3 steps"

    assert resumed["steps"] == unbroken["steps"] == 3
    saved = json.loads((tmp_path / "a" / "summary.json").read_text())  # the run folder holds its summary and plots
    assert saved["steps"] == 3 and saved["sft_wall_s"] == 0.0 and len(saved["tokens_per_s_per_step"]) == 3
    assert 0 < saved["tokens_per_s_end_to_end"] < saved["tokens_per_s_rl_loop"]  # setup counts end to end only
    assert len(saved["config_digest"]) == 16
    plots = sorted(p.name for p in (tmp_path / "a" / "plots").glob("*.png"))
    assert plots == [
        "rates.png",
        "reward.png",
        "speedup.png",
        "staleness.png",
        "throughput.png",
        "turns.png",
        "validation.png",
    ]
    assert resumed["policy_versions"] == unbroken["policy_versions"] == 3
    assert Counter(resumed["trained_group_ids"]) == Counter(unbroken["trained_group_ids"])

    def final_cursor(run: Path) -> dict:
        meta = json.loads((run / "checkpoints" / "step_00000003" / "extra.json").read_text())
        return meta["job"]["queue"]["prompt_source"]["stream"]

    assert final_cursor(killed_dir) == final_cursor(tmp_path / "a")
