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
import socket
import sys
import tempfile
import time
from pathlib import Path

import ray
from ray import serve

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("TRITON_INTERPRET", "1")
CANDIDATES = REPO / "tests" / "serve_apps" / "data"  # kernels read as data: a reference, an honest and a wrong add


@ray.remote(num_cpus=0)
def _caller(app_name: str, first: int, count: int, codes: dict[str, str], options: dict) -> list[tuple[int, bool]]:
    """One rollout-worker-like caller: `count` concurrent evaluations through the deployment handle; odd
    numbers send the wrong kernel, so each answer can be matched to its request."""
    import asyncio

    from serve_apps.verifier import verifier_handle

    handle = verifier_handle(app_name)

    async def one(i: int) -> tuple[int, bool]:
        kernel = codes["wrong_add" if i % 2 else "honest_add"] + f"\n# evaluation {i}\n"
        result = await handle.verify.remote(codes["reference_add"], kernel, options)
        return i, bool(result.correct)

    async def all_of_them() -> list[tuple[int, bool]]:
        return list(await asyncio.gather(*(one(i) for i in range(first, first + count))))

    return asyncio.run(all_of_them())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _replicas(app_name: str) -> int:
    """Running replicas of the app's Verifier deployment."""
    app = serve.status().applications.get(app_name)
    return 0 if app is None else app.deployments["Verifier"].replica_states.get("RUNNING", 0)


def main() -> None:
    from actors.job import TrainJob
    from drkernel.config.base import load_config
    from drkernel.config.train import TrainConfig

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--burst", type=int, default=18)
    ap.add_argument("--downscale-delay-s", type=float, default=2.0)
    a = ap.parse_args()
    ray.init(
        address="local",
        num_cpus=8,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}},
    )
    serve.start(http_options={"host": "127.0.0.1", "port": _free_port()})
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
        options = {"num_correct_trials": 1, "timeout_s": 60, "measure_performance": False, "measure_coverage": False}
        codes = {n: (CANDIDATES / f"{n}.py").read_text() for n in ("reference_add", "honest_add", "wrong_add")}
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
