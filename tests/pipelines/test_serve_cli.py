"""Both ways of starting the verifier, as real subprocesses: `drkernel serve verifier` and `serve run`.

Each starts its own local Ray, answers /healthz and one /verify, and exits cleanly on SIGINT.
Slow (a Ray start each), so one of each.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "serve_apps" / "data"
BODY = {
    "reference_code": (DATA / "reference_add.py").read_text(),
    "kernel_code": (DATA / "honest_add.py").read_text(),
    "options": {"num_correct_trials": 1, "num_perf_trials": 2, "num_warmup": 0},
}


# What the `drkernel` console script runs (the package is not pip-installed in the test venv).
DRKERNEL = [sys.executable, "-c", "import sys; from pipelines.cli import main; sys.exit(main())"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "DRKERNEL_API_TOKEN")}
    env["PYTHONPATH"] = str(REPO)
    return env


def _exercise_and_stop(proc: subprocess.Popen, url: str, startup_s: float = 150) -> str:
    """Poll /healthz until up, verify one honest kernel, send SIGINT, expect a clean exit."""
    try:
        deadline = time.monotonic() + startup_s
        while True:
            assert proc.poll() is None, f"server exited early:\n{proc.stdout.read()}"
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not come up"
            time.sleep(1)
        r = httpx.post(url + "/verify", json=BODY, timeout=120)
        assert r.status_code == 200, r.text
        assert r.json()["correct"] and r.json()["status"] == "ok", r.json()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out
    with pytest.raises(httpx.TransportError):
        httpx.get(url + "/healthz", timeout=2)
    return out


@pytest.mark.integration
def test_drkernel_serve_verifier_subprocess():
    port = _free_port()
    proc = subprocess.Popen(
        [*DRKERNEL, "serve", "verifier", "--host", "127.0.0.1", "--port", str(port),
         "--device", "cpu", "--ray-address", "local", "--num-cpus", "2", "--set", "cpus_per_replica=0.5"],
        cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    out = _exercise_and_stop(proc, f"http://127.0.0.1:{port}")
    assert f"listening on http://127.0.0.1:{port}" in out and "stopping the verifier" in out


@pytest.mark.integration
def test_serve_run_with_the_config_file(tmp_path):
    """The shipped configs/serve_verifier.yaml, with only the port moved off 8000 for the test."""
    port = _free_port()
    config = yaml.safe_load((REPO / "configs" / "serve_verifier.yaml").read_text())
    config["http_options"]["port"] = port
    config["applications"][0]["args"]["cpus_per_replica"] = 0.5
    path = tmp_path / "serve_verifier.yaml"
    path.write_text(yaml.safe_dump(config))
    serve_cli = Path(sys.executable).parent / "serve"
    proc = subprocess.Popen(
        [str(serve_cli), "run", "--address", "local", str(path)],
        cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    _exercise_and_stop(proc, f"http://127.0.0.1:{port}")


@pytest.mark.integration
def test_bad_settings_are_usage_errors():
    r = subprocess.run(
        [*DRKERNEL, "serve", "verifier", "--set", "autoscaling.max_replicas=0", "--set", "cache_sise=3"],
        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert "autoscaling.max_replicas: Input should be greater than or equal to 1" in r.stderr
    assert "cache_sise: unknown key" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_settings_merge_config_file_flags_and_overrides():
    """--config supplies the app args and http_options; flags and --set win over it."""
    from pipelines.cli import build_parser
    from pipelines.serve import _settings, _validated

    config = str(REPO / "configs" / "serve_verifier.yaml")
    args = build_parser("serve").parse_args(["serve", "verifier", "--config", config])
    app_args, host, port = _settings(args)
    assert (host, port) == ("127.0.0.1", 8000)
    cfg = _validated(app_args)  # the shipped file's args are valid as they stand
    assert cfg.device == "cpu" and cfg.autoscaling.max_replicas == 1

    args = build_parser("serve").parse_args(
        ["serve", "verifier", "--config", config, "--port", "9001", "--replicas", "3",
         "--set", "autoscaling.target_ongoing_requests=4", "--set", "cache_size=0"]
    )
    app_args, host, port = _settings(args)
    cfg = _validated(app_args)
    assert port == 9001 and cfg.cache_size == 0
    assert (cfg.autoscaling.min_replicas, cfg.autoscaling.max_replicas) == (3, 3)
    assert cfg.autoscaling.target_ongoing_requests == 4 and cfg.max_queued_requests == 64
