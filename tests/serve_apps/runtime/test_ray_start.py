"""The one Ray start-up, in a fresh process (a test session's Ray is already up): a private cluster gets at least the
CPUs its caller reserves and gives its workers this checkout on PYTHONPATH; a process already connected keeps it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

SCRIPT = """
import json, os, ray
from serve_apps.runtime.ray_start import private_cpus, start_ray
started = start_ray(None, num_cpus=private_cpus(os.cpu_count() + 3), log_to_driver=False)
path = ray.get(ray.remote(lambda: os.environ.get("PYTHONPATH", "")).remote())
print(json.dumps({"started": started, "cpus": ray.cluster_resources()["CPU"], "path": path,
                  "again": start_ray(None)}))
ray.shutdown()
"""


@pytest.mark.integration
def test_a_private_cluster_is_sized_to_the_reservation_and_its_workers_import_the_checkout(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {"PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["started"] is True and seen["again"] is False
    assert seen["cpus"] == (os.cpu_count() or 1) + 3  # more than the machine's: every reserved actor fits
    assert seen["path"].split(os.pathsep)[0] == str(REPO)
