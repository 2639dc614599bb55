"""Both ways of starting the verifier, as real subprocesses: `drkernel serve verifier` and `serve run`.

Each starts its own local Ray, answers /healthz and one /verify, and exits cleanly on SIGINT.
Slow (a Ray start each), so one of each; the refusals of a second `drkernel serve` run against the
first one while it is up. Settings errors are checked before Ray starts, so those runs are quick.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
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


ACCESS_LINE = re.compile(r"\b(GET|POST|CALL) /?(healthz|verify)\S* (200|OK) [\d.]+ms")  # Serve's line per request
# What the `drkernel` console script runs (the package is not pip-installed in the test venv).
DRKERNEL = [sys.executable, "-c", "import sys; from pipelines.cli import main; sys.exit(main())"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _sigint_deliverable() -> Iterator[None]:
    """Servers started here must see SIGINT. A test run launched in the background by a non-interactive shell
    ignores SIGINT, an ignored signal survives exec, and Python then installs no KeyboardInterrupt handler:
    `serve run` would sit through the test's SIGINT. A handled signal is reset to the default across exec."""
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "DRKERNEL_API_TOKEN")}
    env["PYTHONPATH"] = str(REPO)
    return env


def _exercise_and_stop(
    proc: subprocess.Popen, url: str, startup_s: float = 150, while_up: Callable[[str], None] | None = None
) -> str:
    """Poll /healthz until up, verify one honest kernel, run `while_up(output so far)`, verify again,
    send SIGINT, expect a clean exit."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    seen: list[str] = []

    def drain() -> str:
        while not lines.empty():
            seen.append(lines.get())
        return "".join(seen)

    try:
        deadline = time.monotonic() + startup_s
        while True:
            assert proc.poll() is None, f"server exited early:\n{drain()}"
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not come up"
            time.sleep(1)
        try:
            r = httpx.post(url + "/verify", json=BODY, timeout=120)
        except httpx.TransportError as e:
            time.sleep(1)
            raise AssertionError(f"{e!r}; server output:\n{drain()}") from e
        assert r.status_code == 200, r.text
        assert r.json()["correct"] and r.json()["status"] == "ok", r.json()
        if while_up is not None:
            while "listening on" not in drain():
                assert time.monotonic() < deadline, drain()
                time.sleep(0.2)
            while_up(drain())
            r = httpx.post(
                url + "/verify", json={**BODY, "kernel_code": BODY["kernel_code"] + "\n# again\n"}, timeout=120
            )
            assert r.status_code == 200 and r.json()["correct"], r.text  # the first server is untouched
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=150)
        except subprocess.TimeoutExpired:
            time.sleep(1)
            raise AssertionError(f"no exit within 150 s of SIGINT; server output:\n{drain()[-6000:]}") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    time.sleep(0.5)
    out = drain()
    assert proc.returncode == 0, out
    with pytest.raises(httpx.TransportError):
        httpx.get(url + "/healthz", timeout=2)
    return out


def _serve(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**_env(), "RAY_AUTH_MODE": "token"}  # Ray 2.60 clusters require their token to join
    return subprocess.run(
        [*DRKERNEL, "serve", "verifier", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


def _one_line(r: subprocess.CompletedProcess, needle: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [line for line in r.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr, r.stderr


@pytest.mark.integration
def test_drkernel_serve_verifier_subprocess():
    port = _free_port()
    with _sigint_deliverable():
        proc = subprocess.Popen(
            [
                *DRKERNEL,
                "serve",
                "verifier",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--device",
                "cpu",
                "--num-cpus",
                "2",
                "--set",
                "cpus_per_replica=0.5",
            ],
            cwd=REPO,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def second_start(out: str) -> None:
        """A second server is refused in one line and leaves the first one's app alone."""
        start = time.monotonic()
        _one_line(_serve("--port", str(port), "--device", "cpu"), f"cannot listen on 127.0.0.1:{port}")
        assert time.monotonic() - start < 20  # refused before any Ray starts
        (address,) = re.findall(r"Ray cluster (\S+)", out)
        _one_line(
            _serve("--address", address, "--port", str(_free_port()), "--device", "cpu"),
            "already runs a 'verifier' app that this process did not deploy",
        )

    out = _exercise_and_stop(proc, f"http://127.0.0.1:{port}", while_up=second_start)
    assert f"listening on http://127.0.0.1:{port}" in out and "stopping the verifier" in out
    assert not ACCESS_LINE.search(out), out[-3000:]  # no line per request unless --verbose


@pytest.mark.integration
def test_bad_port_and_port_in_use_are_one_line_before_ray_starts():
    start = time.monotonic()
    _one_line(_serve("--port", "70000"), "--port must be between 1 and 65535, got 70000")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        _one_line(_serve("--port", str(port), "--device", "cpu"), f"cannot listen on 127.0.0.1:{port}")
    assert time.monotonic() - start < 60


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
    with _sigint_deliverable():
        proc = subprocess.Popen(
            [str(serve_cli), "run", "--address", "local", str(path)],
            cwd=REPO,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    out = _exercise_and_stop(proc, f"http://127.0.0.1:{port}")
    assert not ACCESS_LINE.search(out), out[-3000:]  # the shipped file turns Serve's access log off


@pytest.mark.integration
def test_bad_settings_are_usage_errors():
    r = subprocess.run(
        [*DRKERNEL, "serve", "verifier", "--set", "autoscaling.max_replicas=0", "--set", "cache_sise=3"],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
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
        [
            "serve",
            "verifier",
            "--config",
            config,
            "--port",
            "9001",
            "--replicas",
            "3",
            "--set",
            "autoscaling.target_ongoing_requests=4",
            "--set",
            "cache_size=0",
        ]
    )
    app_args, host, port = _settings(args)
    cfg = _validated(app_args)
    assert port == 9001 and cfg.cache_size == 0
    assert (cfg.autoscaling.min_replicas, cfg.autoscaling.max_replicas) == (3, 3)
    assert cfg.autoscaling.target_ongoing_requests == 4 and cfg.max_queued_requests == 64
