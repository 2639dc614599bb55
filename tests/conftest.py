"""Shared test paths. KernelBench lives in ../shared beside the checkout (CI puts it there)."""

from __future__ import annotations

import os
from pathlib import Path

# Without an NVIDIA device Triton runs only in its interpreter, and its own library @jit functions (tl.sum's
# combine, ...) are made in the mode that holds when triton is first imported: set it before any test does.
if not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest

REPO = Path(__file__).resolve().parents[1]
KERNELBENCH = REPO.parent / "shared" / "kernelbench" / "KernelBench"


@pytest.fixture(scope="session")
def kernelbench() -> Path:
    """The KernelBench problems folder; its absence is a broken checkout, not a reason to skip."""
    if not (KERNELBENCH / "level1").is_dir():
        pytest.fail(f"KernelBench not found at {KERNELBENCH}: put ../shared beside the repository")
    return KERNELBENCH


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def ray_cluster() -> dict:
    """One local Ray cluster with Serve on loopback, shared by every test that needs Ray (starting one
    costs seconds of the 2-core CI budget). Tests must not call ray.init/ray.shutdown/serve.shutdown
    themselves; they delete only the Serve apps they created. Logical CPUs exceed physical ones on
    purpose: actors in these tests mostly wait."""
    import ray  # a broken Ray install must fail these tests, not skip them
    from ray import serve

    http_port, metrics_port = _free_port(), _free_port()
    if ray.is_initialized():  # something (e.g. Ray Data) started a default cluster earlier in the session
        ray.shutdown()
    ray.init(
        address="local",
        num_cpus=16,
        include_dashboard=False,
        log_to_driver=False,
        _metrics_export_port=metrics_port,
        _system_config={"metrics_report_interval_ms": 1000},
        # the checkout first, then any site the caller carries (the GPU machine has no Ray of its own)
        runtime_env={
            "env_vars": {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        },
    )
    ray.data.DataContext.get_current().enable_progress_bars = False
    serve.start(http_options={"host": "127.0.0.1", "port": http_port})
    yield {"http_url": f"http://127.0.0.1:{http_port}", "metrics_url": f"http://127.0.0.1:{metrics_port}/metrics"}
    serve.shutdown()
    ray.shutdown()
