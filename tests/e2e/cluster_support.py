"""A private Ray cluster started as users start one (`ray start`), and `ray job` commands against it.

Every port is chosen free here and the cluster has its own --temp-dir: Ray's fixed defaults (dashboard agent
52365, client server 10001) are already held by the session cluster of tests/conftest.py, and a second head on
them cannot take job submissions. It is stopped by killing only its own processes (`ray stop` would stop every
Ray on the machine).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from drkernel.config.base import load_config
from drkernel.config.train import TrainConfig

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
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


def ray_cmd(*args: str, env: dict, timeout: float = 180) -> subprocess.CompletedProcess:
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


@contextmanager
def private_cluster(temp_dir: Path, head_cpus: int, worker_cpus: int | None = None) -> Iterator[dict]:
    """A head with `head_cpus` CPUs (plus a worker node with `worker_cpus`, if given) on this host; yields what
    `submit` and friends need. Ray 2.60's `ray start` turns token auth on; the job's `python` is the cluster's,
    so the venv leads PATH."""
    gcs, dashboard, client, serve_http, *ports = _ports(16)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {
        "RAY_AUTH_MODE": "token",
        "PYTHONPATH": str(REPO),
        "RAY_USAGE_STATS_ENABLED": "0",
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        MARK: str(temp_dir),  # inherited by every process of this cluster, and only by those
    }
    mark = re.compile(rf"{re.escape(str(temp_dir))}|:{gcs}\b")
    try:
        head = ray_cmd(
            "start",
            "--head",
            f"--port={gcs}",
            f"--dashboard-port={dashboard}",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--ray-client-server-port={client}",
            f"--num-cpus={head_cpus}",
            f"--temp-dir={temp_dir}",
            *_node_ports(ports[:6]),
            env=env,
        )
        assert head.returncode == 0, head.stderr[-3000:]
        if worker_cpus is not None:
            worker = ray_cmd(
                "start", f"--address=127.0.0.1:{gcs}", f"--num-cpus={worker_cpus}", *_node_ports(ports[6:12]), env=env
            )
            assert worker.returncode == 0, worker.stderr[-3000:]
        yield {
            "address": f"http://127.0.0.1:{dashboard}",
            "gcs": f"127.0.0.1:{gcs}",
            "env": env,
            "serve_http": serve_http,
            "mark": str(temp_dir),
        }
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


def submit(cluster: dict, args: list[str]) -> str:
    out = ray_cmd(
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


def status(cluster: dict, job: str) -> str:
    out = ray_cmd("job", "status", "--address", cluster["address"], job, env=cluster["env"])
    text = out.stdout + out.stderr  # e.g. "Job 'raysubmit_x' succeeded" / "... is currently RUNNING"
    found = re.search(r"Job '\S+' (succeeded|failed|was stopped)|Status for job '\S+': (?:JobStatus\.)?(\w+)", text)
    if not found:
        return "UNKNOWN"
    word = found.group(1) or found.group(2)
    return {"succeeded": "SUCCEEDED", "failed": "FAILED", "was stopped": "STOPPED"}.get(word, word.upper())


def logs(cluster: dict, job: str) -> str:
    return ray_cmd("job", "logs", "--address", cluster["address"], job, env=cluster["env"]).stdout


def demo_shares() -> list[str]:
    """The demo's CPU reservations, read from its config (1.75 CPUs of actors and replicas, 1 per read task)."""
    demo = load_config(TrainConfig, REPO / "configs" / "demo.yaml", [])
    return [
        f"policy.cpus_per_replica={demo.policy.cpus_per_replica}",
        f"verifier.cpus_per_replica={demo.verifier.cpus_per_replica}",
        f"trainer.cpus_per_worker={demo.trainer.cpus_per_worker}",
        f"rollout.cpus_per_worker={demo.rollout.cpus_per_worker}",
        f"rl_data.read_cpus={demo.rl_data.read_cpus}",
    ]
