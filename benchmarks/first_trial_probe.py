"""Where a runner's first correctness trial goes on a GPU (issue 26): the pieces it pays once per process, timed
one by one in fresh processes of the same uid, the way the verifier's judge and runners meet them.

    python3 benchmarks/first_trial_probe.py [--sizes-mb 1 256 6144]

For each size: the judge side allocating a buffer in a private memory pool and making its IPC handle, the runner
side opening it (first time, and a second buffer of the pool), and in a fresh runner the first and second call of
common operators (an elementwise chain, softmax, layer norm, a matmul, a depthwise convolution, max pooling).
Prints one JSON line per measurement; nothing here is a verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import time
from typing import Any

import torch
import torch.multiprocessing as mp
from torch.multiprocessing.reductions import reduce_tensor


def ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1e3, 3)


def runner(conn: Any) -> None:
    torch.cuda.synchronize()  # the context exists before anything is timed, as in a spare
    out = {}
    for label in ("first", "second"):
        func, args = pickle.loads(conn.recv_bytes())
        t0 = time.perf_counter()
        x = func(*args)
        torch.cuda.synchronize()
        out[f"open_{label}_ms"] = ms(t0)
        t0 = time.perf_counter()
        x.add_(0)
        torch.cuda.synchronize()
        out[f"touch_{label}_ms"] = ms(t0)
    conn.send_bytes(json.dumps(out).encode())


def ops(conn: Any) -> None:
    torch.cuda.synchronize()
    F = torch.nn.functional
    x = torch.randn(256, 4096, device="cuda")
    img = torch.randn(16, 32, 64, 64, device="cuda")
    w = torch.randn(32, 1, 3, 3, device="cuda")
    cases = {
        "gelu_chain": lambda: 0.5 * x * (1 + torch.tanh(0.79788 * (x + 0.044715 * torch.pow(x, 3.0)))),
        "softmax": lambda: torch.softmax(x, -1),
        "layer_norm": lambda: F.layer_norm(x, x.shape[-1:]),
        "matmul": lambda: x @ x.t(),
        "depthwise_conv": lambda: F.conv2d(img, w, groups=32),
        "max_pool": lambda: F.max_pool2d(img, 2),
    }
    out = {}
    for name, fn in cases.items():
        for label in ("first", "second"):
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            out[f"{name}_{label}_ms"] = ms(t0)
    conn.send_bytes(json.dumps(out).encode())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes-mb", type=int, nargs="+", default=[1, 256, 6144])
    a = p.parse_args()
    ctx = mp.get_context("spawn")
    pool = torch.cuda.MemPool()
    for size in a.sizes_mb:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=runner, args=(child,))
        proc.start()
        row = {"size_mb": size}
        for label in ("first", "second"):
            t0 = time.perf_counter()
            with torch.cuda.use_mem_pool(pool):
                t = torch.empty(size << 18, device="cuda")
            t.zero_()
            torch.cuda.synchronize()
            row[f"alloc_{label}_ms"] = ms(t0)
            t0 = time.perf_counter()
            message = pickle.dumps(reduce_tensor(t))
            row[f"handle_{label}_ms"] = ms(t0)
            parent.send_bytes(message)
        row.update(json.loads(parent.recv_bytes()))
        proc.join()
        print(json.dumps(row), flush=True)
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=ops, args=(child,))
    t0 = time.perf_counter()
    proc.start()
    print(json.dumps({"fresh_runner_ops": json.loads(parent.recv_bytes()), "process_s": round(ms(t0) / 1e3, 2)}))
    proc.join()
    print(json.dumps({"pid": os.getpid(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
