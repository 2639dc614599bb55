"""How fast the job's verifier app scales on CPU: time from the start of a burst of evaluations until Serve
runs 3 replicas, and from the burst's last answer until it is back to 1 (issue 20).

    python benchmarks/verifier_autoscale_bench.py [--burst 18] [--downscale-delay-s 2]

A private local Ray; the app is deployed the way the training job deploys it (TrainJob._deploy_verifier:
the `drkernel serve verifier` application, autoscaling 1..3 on ongoing requests, target 1, upscale delay 0);
3 Ray tasks send the burst through the deployment handle, as rollout workers do. Replica start includes the
verifier's warm fork-server (torch and Triton imported), which is most of the scale-up time on CPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "serve_apps"))
sys.path.insert(0, str(REPO))
os.environ.setdefault("TRITON_INTERPRET", "1")


def main() -> None:
    import ray
    from ray import serve

    from actors.job import TrainJob
    from drkernel.config.base import load_config
    from drkernel.config.train import TrainConfig

    sys.path.insert(0, str(REPO / "tests" / "serve_apps"))
    from serve_test_support import FAST_OPTIONS, code, free_port
    from test_verifier_autoscaling import _caller, _replicas

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--burst", type=int, default=18)
    ap.add_argument("--downscale-delay-s", type=float, default=2.0)
    a = ap.parse_args()
    ray.init(
        address="local",
        num_cpus=8,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests" / "serve_apps")])}},
    )
    serve.start(http_options={"host": "127.0.0.1", "port": free_port()})
    name = "bench-autoscale-verifier"
    cfg = load_config(
        TrainConfig,
        None,
        [
            f"trainer.output_dir={tempfile.mkdtemp()}",
            f"verifier.app_name={name}",
            "verifier.cpus_per_replica=0",
            "verifier.max_concurrency=1",
            "verifier.max_ongoing_requests=2",
            "verifier.autoscaling.min_replicas=1",
            "verifier.autoscaling.max_replicas=3",
            "verifier.autoscaling.target_ongoing_requests=1",
            "verifier.autoscaling.upscale_delay_s=0",
            f"verifier.autoscaling.downscale_delay_s={a.downscale_delay_s}",
        ],
    )
    job = TrainJob(cfg)
    try:
        job._deploy_verifier()
        while _replicas(name) != 1:
            time.sleep(0.2)
        options = {**FAST_OPTIONS, "num_correct_trials": 1, "measure_performance": False, "measure_coverage": False}
        codes = {n: code(n) for n in ("reference_add", "honest_add", "wrong_add")}
        per = a.burst // 3
        t0 = time.monotonic()
        calls = [_caller.remote(name, c * per, per, codes, options) for c in range(3)]
        while _replicas(name) < 3:
            time.sleep(0.2)
        up = time.monotonic() - t0
        answers = [x for batch in ray.get(calls) for x in batch]
        t1 = time.monotonic()
        while _replicas(name) > 1:
            time.sleep(0.2)
        down = time.monotonic() - t1
    finally:
        job.cleanup()
        serve.shutdown()
        ray.shutdown()
    print(
        f"burst of {len(answers)} evaluations: 1 -> 3 replicas in {up:.1f} s after the burst began; burst answered "
        f"in {t1 - t0:.1f} s; 3 -> 1 in {down:.1f} s after the last answer (downscale delay {a.downscale_delay_s} s); "
        f"load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
