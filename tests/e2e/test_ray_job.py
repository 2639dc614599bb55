"""The job as users start it on a real cluster: `ray job submit` to a head node that offers nothing to place
(`ray start --head --num-cpus 0`, as a cluster's head usually is) plus one worker node on this host. The SFT
warm start, trainer, policy, verifier and rollout workers all run on the worker node; the job's files live in
its run folder (outside Ray's copy of the working dir); two steps train; `ray job stop` leaves no fork-server
or engine behind.

The cluster is private to this test: its own --temp-dir, and every port of both nodes chosen free here. Ray's
defaults are fixed numbers (dashboard agent 52365, client server 10001) that the session cluster of
tests/conftest.py (or any other Ray on the machine) already holds; with them the head's dashboard agent
cannot bind its HTTP port, stays up without it, and every submission is refused with "No available agent to
submit job". The test therefore runs beside the session cluster on purpose. It is stopped by killing only its
own processes: `ray stop` would also stop every other Ray on the machine.
"""

from __future__ import annotations

import ast
import json
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
STEPS = 50  # never reached: the job is stopped after its second step
MARK = "DRKERNEL_TEST_CLUSTER"


def _ports(n: int) -> list[int]:
    """n distinct free ports outside Ray's default worker range (10002-19999), which a GCS port may not use."""
    found: list[int] = []
    held = []
    try:
        while len(found) < n:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            held.append(s)
            port = s.getsockname()[1]
            if not 10002 <= port <= 19999:
                found.append(port)
    finally:
        for s in held:
            s.close()
    return found


def _ray(*args: str, env: dict, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "ray"), *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def _node_ports(ports: list[int]) -> list[str]:
    """The ports every node opens; left to Ray they collide with another Ray on the same host."""
    agent, agent_grpc, metrics, runtime_env, node_manager, object_manager = ports
    return [
        f"--dashboard-agent-listen-port={agent}",
        f"--dashboard-agent-grpc-port={agent_grpc}",
        f"--metrics-export-port={metrics}",
        f"--runtime-env-agent-port={runtime_env}",
        f"--node-manager-port={node_manager}",
        f"--object-manager-port={object_manager}",
    ]


def _cluster_processes(mark: re.Pattern) -> list[psutil.Process]:
    """Processes naming this cluster (its temp dir or GCS port) and all their descendants: the dashboard
    agent and workers retitle themselves ('ray::DashboardAgent'), so only their ancestry names them."""
    mine = {}
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if proc.pid != os.getpid() and mark.search(" ".join(proc.info["cmdline"] or [])):
                mine[proc.pid] = proc
                mine.update({c.pid: c for c in proc.children(recursive=True)})
        except psutil.Error:
            continue
    return list(mine.values())


@pytest.fixture(scope="module")
def two_node_cluster(ray_cluster, tmp_path_factory):
    """Depends on the session cluster so that a Ray holding the default ports is always up beside this one."""
    temp_dir = tmp_path_factory.mktemp("raytmp")
    gcs, dashboard, client, serve_http, *ports = _ports(16)
    # Ray 2.60's `ray start` turns token auth on; the job's `python` is the cluster's, so the venv leads PATH.
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {
        "RAY_AUTH_MODE": "token",
        "PYTHONPATH": str(REPO),
        "RAY_USAGE_STATS_ENABLED": "0",
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        MARK: str(temp_dir),  # inherited by every process of this cluster, and only by those
    }
    mark = re.compile(rf"{re.escape(str(temp_dir))}|:{gcs}\b")
    try:
        head = _ray(
            "start",
            "--head",
            f"--port={gcs}",
            f"--dashboard-port={dashboard}",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--ray-client-server-port={client}",
            "--num-cpus=0",
            f"--temp-dir={temp_dir}",
            *_node_ports(ports[:6]),
            env=env,
        )
        assert head.returncode == 0, head.stderr[-3000:]
        worker = _ray("start", f"--address=127.0.0.1:{gcs}", "--num-cpus=3", *_node_ports(ports[6:12]), env=env)
        assert worker.returncode == 0, worker.stderr[-3000:]
        yield {"address": f"http://127.0.0.1:{dashboard}", "env": env, "serve_http": serve_http, "mark": str(temp_dir)}
    finally:
        procs = _cluster_processes(mark)
        for proc in procs:
            try:
                proc.send_signal(signal.SIGTERM)
            except psutil.Error:
                pass
        _, alive = psutil.wait_procs(procs, timeout=20)
        for proc in alive:
            try:
                proc.kill()
            except psutil.Error:
                pass


def _submit(cluster: dict, args: list[str]) -> str:
    out = _ray(
        "job",
        "submit",
        "--address",
        cluster["address"],
        "--working-dir",
        ".",
        "--runtime-env",
        "runtime_env.yaml",
        "--no-wait",
        "--",
        "python",
        "-m",
        "pipelines.train",
        *args,
        env=cluster["env"],
    )
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


def _engines_and_forkservers(mark: str) -> set[str]:
    """Serve replicas of this job's apps and fork-servers of this cluster (its processes carry `mark` in their
    environment: the session cluster and other test runs on the host start fork-servers of their own)."""
    left = set()
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if proc.environ().get(MARK) != mark:
                continue
        except psutil.Error:
            continue
        cmd = " ".join(proc.info["cmdline"] or [])
        ours = "multiprocessing.forkserver" in cmd and "drkernel.verify" in cmd  # not Ray's dashboard fork-servers
        if "drkernel-train-policy" in cmd or "drkernel-train-verifier" in cmd or ours:
            left.add(cmd[:200])
    return left


def test_submitted_job_runs_on_the_worker_node_and_stop_leaves_nothing(two_node_cluster, tiny_recipe, tmp_path):
    _, overrides = tiny_recipe
    cluster = two_node_cluster
    before = _engines_and_forkservers(cluster["mark"])
    run = tmp_path / "run"

    job = _submit(
        cluster,
        [
            "--output-dir",
            str(run),
            *overrides,
            "sft.output_dir=sft",  # relative: the warm start runs in the job and lands in the run folder
            "model.output_dir=base",
            "sft.epochs=2",  # only where it runs is under test here; the session's recipe already trained one
            f"trainer.total_steps={STEPS}",
            f"policy.http_port={cluster['serve_http']}",  # Serve's default 8000 may be taken
        ],
    )
    deadline = time.monotonic() + 1200  # a hang guard: at load 20 the two steps took over 10 minutes
    while f"step 2/{STEPS}" not in (logs := _logs(cluster, job)):
        assert _status(cluster, job) in ("PENDING", "RUNNING"), logs[-4000:]
        assert time.monotonic() < deadline, "no second training step within 20 minutes"
        time.sleep(3)
    assert f"run folder {run}" in logs and "run folder shared by all 2 node(s)" in logs, logs[-3000:]
    assert "SFT warm start done on node" in logs, logs[-3000:]
    placed = re.search(r"actors and replicas of this job on \d+ node\(s\); on the head node: (\[.*\])", logs)
    assert placed, logs[-3000:]
    on_head = ast.literal_eval(placed.group(1))  # a head without CPUs may host only zero-CPU helpers
    roles = ("TrainerWorker", "RolloutWorker", ":PolicyReplica", ":Verifier")
    assert not [name for name in on_head if name.endswith(roles)], on_head

    running = _engines_and_forkservers(cluster["mark"]) - before
    assert any("drkernel-train-policy" in cmd for cmd in running), running  # what the check after the stop sees

    stop = _ray("job", "stop", "--address", cluster["address"], job, env=cluster["env"], timeout=180)
    assert stop.returncode == 0, stop.stderr[-2000:]
    assert _status(cluster, job) == "STOPPED", _logs(cluster, job)[-3000:]
    deadline = time.monotonic() + 180  # a loaded 2-core box takes its time to reap a killed replica's children
    while _engines_and_forkservers(cluster["mark"]) - before and time.monotonic() < deadline:
        time.sleep(1)
    left = sorted(_engines_and_forkservers(cluster["mark"]) - before)
    assert not left, f"engines or fork-servers outlived `ray job stop`: {left}\n{_logs(cluster, job)[-6000:]}"
    assert (run / "sft" / "config.json").is_file()  # the SFT checkpoint the worker node wrote, in the run folder
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps[:2] == [1, 2]
