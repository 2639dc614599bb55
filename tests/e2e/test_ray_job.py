"""The job as users start it: `ray job submit` to a two-node cluster on this host (`ray start --head` plus
`ray start --address`), and `ray job stop` leaving no fork-server, evaluation child or engine behind.

The cluster is private to this test (its own ports and --temp-dir) and stopped by killing only its own
processes: `ray stop` would also stop every other Ray on the machine.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not 10002 <= port <= 19999:  # Ray's default worker port range
            return port


def _ray(*args: str, env: dict, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "ray"), *args], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def _cluster_processes(temp_dir: Path) -> list[psutil.Process]:
    mine = []
    for proc in psutil.process_iter(["cmdline", "environ"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
        except psutil.Error:
            continue
        if str(temp_dir) in cmd:
            mine.append(proc)
    return mine


@pytest.fixture(scope="module")
def two_node_cluster(tmp_path_factory):
    temp_dir = tmp_path_factory.mktemp("raytmp")
    gcs, dashboard = _port(), _port()
    # Ray 2.60's `ray start` turns token auth on; the job's `python` is the cluster's, so the venv leads PATH.
    env = {**os.environ, "RAY_AUTH_MODE": "token", "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0",
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    head = _ray("start", "--head", f"--port={gcs}", f"--dashboard-port={dashboard}", "--include-dashboard=true",
                "--num-cpus=1", f"--temp-dir={temp_dir}", "--dashboard-host=127.0.0.1", env=env)
    assert head.returncode == 0, head.stderr[-3000:]
    worker = _ray("start", f"--address=127.0.0.1:{gcs}", "--num-cpus=2", env=env)
    try:
        assert worker.returncode == 0, worker.stderr[-3000:]
        yield {"address": f"http://127.0.0.1:{dashboard}", "env": env, "temp_dir": temp_dir}
    finally:
        # Every process of this cluster carries its session dir (under temp_dir) or its GCS port in argv.
        procs = _cluster_processes(temp_dir) + [
            p for p in psutil.process_iter(["cmdline"]) if f"127.0.0.1:{gcs}" in " ".join(p.info["cmdline"] or [])]
        for proc in procs:
            try:
                proc.send_signal(signal.SIGTERM)
            except psutil.Error:
                pass
        psutil.wait_procs(procs, timeout=20)
        for proc in procs:
            try:
                proc.kill()
            except psutil.Error:
                pass


def _submit(cluster: dict, args: list[str]) -> str:
    deadline = time.monotonic() + 120
    while True:  # a fresh head answers "No available agent to submit job" until its dashboard agent is up
        out = _ray("job", "submit", "--address", cluster["address"], "--working-dir", ".", "--runtime-env",
                   "runtime_env.yaml", "--no-wait", "--", "python", "-m", "pipelines.train", *args,
                   env=cluster["env"])
        if "No available agent" not in out.stderr + out.stdout or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    found = re.search(r"raysubmit_\w+", out.stdout + out.stderr)
    assert found, out.stdout
    return found.group(0)


def _status(cluster: dict, job: str) -> str:
    out = _ray("job", "status", "--address", cluster["address"], job, env=cluster["env"])
    text = out.stdout + out.stderr  # e.g. "Job 'raysubmit_x' succeeded" / "... is currently RUNNING"
    found = re.search(r"Job '\S+' (succeeded|failed|was stopped)|Status for job '\S+': (?:JobStatus\.)?(\w+)", text)
    if not found:
        return "UNKNOWN"
    word = found.group(1) or found.group(2)
    return {"succeeded": "SUCCEEDED", "failed": "FAILED", "was stopped": "STOPPED"}.get(word, word.upper())


def _logs(cluster: dict, job: str) -> str:
    return _ray("job", "logs", "--address", cluster["address"], job, env=cluster["env"]).stdout


def _wait(cluster: dict, job: str, until: set[str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while (status := _status(cluster, job)) not in until:
        assert time.monotonic() < deadline, f"job {job} still {status}: {_logs(cluster, job)[-4000:]}"
        time.sleep(3)
    return status


def _engines_and_forkservers(temp_dir: Path) -> list[str]:
    """Serve replicas of this job's apps and fork-servers still running on this cluster."""
    left = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if "drkernel-train-policy" in cmd or "drkernel-train-verifier" in cmd or "multiprocessing.forkserver" in cmd:
            left.append(cmd[:200])
    return left


def test_submitted_job_runs_on_two_nodes_and_stop_leaves_nothing(two_node_cluster, tiny_recipe, tmp_path):
    _, overrides = tiny_recipe
    cluster = two_node_cluster
    before = set(_engines_and_forkservers(cluster["temp_dir"]))

    job = _submit(cluster, [*overrides, f"trainer.output_dir={tmp_path / 'ok'}"])
    assert _wait(cluster, job, {"SUCCEEDED", "FAILED", "STOPPED"}, 900) == "SUCCEEDED", _logs(cluster, job)[-4000:]
    logs = _logs(cluster, job)
    placed = re.search(r"actors and replicas of this job on (\d+) node", logs)
    assert placed and int(placed.group(1)) == 2, logs[-3000:]
    assert re.search(r'"steps": 2,', logs) and re.search(r'"policy_versions": 2,', logs), logs[-3000:]

    job = _submit(cluster, [*overrides, "trainer.total_steps=50", f"trainer.output_dir={tmp_path / 'stopped'}"])
    deadline = time.monotonic() + 600
    while "step 1/50" not in _logs(cluster, job):
        assert _status(cluster, job) in ("PENDING", "RUNNING"), _logs(cluster, job)[-4000:]
        assert time.monotonic() < deadline, "no training step within 10 minutes"
        time.sleep(3)
    stop = _ray("job", "stop", "--address", cluster["address"], job, env=cluster["env"], timeout=180)
    assert stop.returncode == 0, stop.stderr[-2000:]
    assert _wait(cluster, job, {"STOPPED", "FAILED", "SUCCEEDED"}, 120) == "STOPPED"
    deadline = time.monotonic() + 60
    while set(_engines_and_forkservers(cluster["temp_dir"])) - before and time.monotonic() < deadline:
        time.sleep(1)
    assert not set(_engines_and_forkservers(cluster["temp_dir"])) - before
