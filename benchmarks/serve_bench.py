"""Verifications per second through the Serve HTTP endpoint (1 replica) vs the verifier core directly.

Same candidates, same concurrency, one run: the ratio is what Ray Serve, HTTP and JSON cost on top
of the evaluations themselves. Candidates are the honest solutions of the shipped task library; each
is submitted `--rounds` times with a distinct trailing comment, so every request is a real
evaluation (the Serve result cache never answers). A warm-up pass first fills Triton's kernel cache
so neither side pays for compilation.

    python benchmarks/serve_bench.py --device cuda                   # H200
    python benchmarks/serve_bench.py --device cpu --smoke            # a minute on a laptop
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from drkernel.config.verifier import VerifyOptions  # noqa: E402
from drkernel.tasks.loader import load_tasks  # noqa: E402
from drkernel.verify.engine import Verifier  # noqa: E402

Pairs = list[tuple[str, str]]


def _payloads(n_tasks: int, rounds: int) -> tuple[Pairs, Pairs]:
    """(warm-up pairs, timed pairs): every timed pair differs in a trailing comment."""
    tasks = [t for t in load_tasks() if t.solutions][:n_tasks]
    pairs = [(t.reference, src) for t in tasks for src in t.solutions.values()]
    return pairs, [(ref, f"{cand}\n# bench round {r}\n") for r in range(rounds) for ref, cand in pairs]


def _direct(warm: Pairs, payloads: Pairs, options: VerifyOptions, device: str, concurrency: int):
    core = Verifier(device=device, max_concurrency=concurrency)
    try:
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(lambda p: core.verify(p[0], p[1], options), warm))
            latencies: list[float] = []

            def timed(p: tuple[str, str]):
                t = time.monotonic()
                result = core.verify(p[0], p[1], options)
                latencies.append(time.monotonic() - t)
                return result

            start = time.monotonic()
            results = list(pool.map(timed, payloads))
            wall = time.monotonic() - start
    finally:
        core.close()
    return results, wall, latencies


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_serve(device: str, concurrency: int) -> str:
    """Local Ray + the verifier app with one replica; returns its URL."""
    import ray
    from ray import serve

    from serve_apps.verifier_app import build_app

    port = _free_port()
    # Keep the caller's PYTHONPATH: on a machine where Ray itself comes from a carried site, workers need it.
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    ray.init(address="local", include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": path}})
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(
        build_app(
            {
                "device": device,
                "max_concurrency": concurrency,
                "cpus_per_replica": 0,
                "autoscaling": {"min_replicas": 1, "max_replicas": 1},
                # One client may hold half of 75 % of the replica's request slots (max_client_share, handle_reserve):
                # enough slots that this single client still gets `concurrency` evaluations at once.
                "max_ongoing_requests": max(8, concurrency * 4),
                "queue_limit": max(concurrency * 4, 16),
                "max_batch": 4,  # single /verify requests only; a batch must fit one client's share of the queue
                "deadline_s": 3600,
            }
        ),
        name="verifier",
        route_prefix="/",
    )
    return f"http://127.0.0.1:{port}"


def _via_http(url: str, warm: Pairs, payloads: Pairs, options: VerifyOptions, concurrency: int):
    """(results, wall, latencies) of the timed payloads, then the latencies of the same payloads
    sent again (all cache hits: what HTTP + Serve + JSON cost per request)."""
    opts = options.model_dump(mode="json", exclude_unset=True)  # unset fields keep the core's device defaults

    async def main():
        latencies: list[float] = []
        sem = asyncio.Semaphore(concurrency)
        async with httpx.AsyncClient(
            base_url=url, timeout=3600, limits=httpx.Limits(max_connections=concurrency)
        ) as client:

            async def one(ref: str, cand: str) -> dict:
                async with sem:
                    t = time.monotonic()
                    r = await client.post("/verify", json={"reference_code": ref, "kernel_code": cand, "options": opts})
                    latencies.append(time.monotonic() - t)
                    r.raise_for_status()
                    return r.json()

            await asyncio.gather(*(one(ref, cand) for ref, cand in warm))
            latencies.clear()
            start = time.monotonic()
            results = await asyncio.gather(*(one(ref, cand) for ref, cand in payloads))
            wall = time.monotonic() - start
            timed = list(latencies)
            latencies.clear()
            await asyncio.gather(*(one(ref, cand) for ref, cand in payloads))
            return results, wall, timed, list(latencies)

    return asyncio.run(main())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--smoke", action="store_true", help="tiny CPU run: 2 tasks, 1 round, few trials")
    parser.add_argument("--tasks", type=int, default=12, help="library tasks to draw candidates from")
    parser.add_argument("--rounds", type=int, default=3, help="submissions of each candidate (distinct comment)")
    parser.add_argument("--concurrency", type=int, default=2, help="evaluations in flight, both ways")
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.rounds = 2, 1
    # On CPU the core picks interpreter-sized timing defaults for the fields left unset.
    options = VerifyOptions(device=args.device, num_correct_trials=2 if args.smoke else 5)
    warm, payloads = _payloads(args.tasks, args.rounds)
    print(
        f"{len(payloads)} evaluations ({args.tasks} tasks x solutions x {args.rounds} rounds), "
        f"device {args.device}, concurrency {args.concurrency}",
        flush=True,
    )

    import ray
    from ray import serve

    url = _start_serve(args.device, args.concurrency)  # up first, so both runs share its background load
    try:
        d_results, d_wall, d_lat = _direct(warm, payloads, options, args.device, args.concurrency)
        s_results, s_wall, s_lat, hit_lat = _via_http(url, warm, payloads, options, args.concurrency)
    finally:
        serve.shutdown()
        ray.shutdown()

    d_ok = [r.correct for r in d_results]
    s_ok = [r["correct"] for r in s_results]
    rows = [("core directly", d_wall, d_lat, sum(d_ok)), ("Serve HTTP, 1 replica", s_wall, s_lat, sum(s_ok))]
    print(f"{'path':<24}{'wall s':>9}{'verif/s':>10}{'p50 s':>8}{'p90 s':>8}{'correct':>9}")
    for name, wall, lat, ok in rows:
        lat = sorted(lat)
        print(
            f"{name:<24}{wall:>9.2f}{len(payloads) / wall:>10.2f}{statistics.median(lat):>8.3f}"
            f"{lat[int(0.9 * (len(lat) - 1))]:>8.3f}{ok:>6}/{len(payloads)}"
        )
    print(f"Serve / direct throughput ratio: {d_wall / s_wall:.3f}  (1.0 = no overhead)")
    hit_lat.sort()
    print(
        f"HTTP round trip of a cached result: p50 {1000 * statistics.median(hit_lat):.1f} ms, "
        f"p90 {1000 * hit_lat[int(0.9 * (len(hit_lat) - 1))]:.1f} ms ({args.concurrency} in flight)"
    )
    if d_ok != s_ok:
        for i, (d, s) in enumerate(zip(d_results, s_results)):
            if d.correct != s["correct"]:
                print(
                    f"verdicts differ on evaluation {i}: direct {d.status} {d.error}, serve {s['status']} {s['error']}",
                    file=sys.stderr,
                )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
