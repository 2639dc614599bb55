"""Weight push time against model size, through the real path: WeightPublisher (BucketPacker with reused
staging -> one ray.put per bucket) -> a receiving actor's load_weights (ray.get + unpack_into) -> ack.

    .venv/bin/python -m benchmarks.weight_push_bench --sizes-mb 10 100 --reps 5
    .venv/bin/python -m benchmarks.weight_push_bench --sizes-mb 10 100 400 --replicas 2 --bucket-mb 512

Prints the median (and min) milliseconds of each phase per size; the first push of each size is a warm-up
(it allocates the staging buffers and the receiver's first touch) and is not counted.
"""

from __future__ import annotations

import argparse
import statistics
import time

import ray
import torch

from actors.weight_sync import ActorReplicas, WeightPublisher
from drkernel.model.weights import state_checksum, unpack_into

WIDTH = 1024


def make_state(size_mb: int) -> dict[str, torch.Tensor]:
    """fp32 tensors shaped like a transformer's: one embedding (~1/4 of the bytes) plus 1024x1024 blocks."""
    total = size_mb * (1 << 20) // 4
    embed_rows = max(total // 4 // WIDTH, 1)
    state = {"embed.weight": torch.randn(embed_rows, WIDTH)}
    left, k = total - embed_rows * WIDTH, 0
    while left > 0:
        n = min(WIDTH * WIDTH, left)
        state[f"layers.{k}.weight"] = torch.randn(n // WIDTH or 1, WIDTH if n >= WIDTH else n)
        state[f"layers.{k}.norm"] = torch.randn(WIDTH)
        left -= n
        k += 1
    return state


@ray.remote(num_cpus=0)
class Receiver:
    """Holds a same-shaped state dict and loads pushes into it, timing fetch and copy like a policy replica."""

    def __init__(self, shapes: dict[str, list[int]]) -> None:
        self.params = {k: torch.zeros(v) for k, v in shapes.items()}

    def load_weights(self, version, bucket_refs, manifest):
        start = time.perf_counter()
        buckets = ray.get(bucket_refs)
        fetched = time.perf_counter()
        unpack_into(self.params, buckets, manifest)
        del buckets
        return {"version": version, "get_s": fetched - start, "load_s": time.perf_counter() - fetched}

    def state_checksum(self) -> str:
        return state_checksum(self.params)


PHASES = ("pack_s", "put_s", "replica_get_s", "replica_load_s", "load_s", "free_s", "total_s")


def bench(size_mb: int, reps: int, replicas: int, bucket_mb: int) -> dict[str, list[float]]:
    state = make_state(size_mb)
    receivers = [Receiver.remote({k: list(v.shape) for k, v in state.items()}) for _ in range(replicas)]
    publisher = WeightPublisher(ActorReplicas(receivers), bucket_mb=bucket_mb)
    times: dict[str, list[float]] = {p: [] for p in PHASES}
    for rep in range(reps + 1):
        state["embed.weight"][0, 0] = float(rep)  # a different version each time
        report = publisher.publish(state)
        if rep:
            for p in PHASES:
                times[p].append(getattr(report, p) * 1e3)
    checks = ray.get([r.state_checksum.remote() for r in receivers])
    assert checks == [state_checksum(state)] * replicas, "receiver weights differ from the trainer's"
    for r in receivers:
        ray.kill(r)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--bucket-mb", type=int, default=512)
    parser.add_argument("--object-store-mb", type=int, default=2048)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=args.object_store_mb << 20, log_to_driver=False)
    print(f"replicas={args.replicas} bucket_mb={args.bucket_mb} reps={args.reps} (median / min ms)")
    print("size_mb | " + " | ".join(p.removesuffix("_s") for p in PHASES))
    for size in args.sizes_mb:
        times = bench(size, args.reps, args.replicas, args.bucket_mb)
        cells = [f"{statistics.median(times[p]):.1f} / {min(times[p]):.1f}" for p in PHASES]
        print(f"{size} | " + " | ".join(cells), flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
