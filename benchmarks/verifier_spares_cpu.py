"""Issue 26 on CPU: evaluations/s of one warm Verifier on the shipped task library, with spare evaluation groups
(new) and without (each evaluation forks its own children), and optionally the verifier of an older worktree,
side by side in one run, for the demo's `timing: cpu_model` and for measured timing, one and two at a time.

Each (variant, timing, concurrency) cell runs in its own subprocess that imports the verifier from its root,
starts a Verifier (start-up not counted), evaluates one warm-up pair, then times the set. Cells are interleaved
round by round so load on a shared box falls on every variant alike. Every solution's verdict is printed next
to the throughput, so a faster but wrong verifier shows.

    python benchmarks/verifier_spares_cpu.py --tasks 10 --rounds 2 [--old-worktree /tmp/old26] [--no-off] --out s.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CELL = r"""
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, sys.argv[1])
from drkernel.tasks import load_tasks
from drkernel.verify import VerifyOptions
from drkernel.verify.engine import Verifier

spares, timing, concurrency, n = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
tasks = sorted(load_tasks(), key=lambda t: t.name)[:n]
pairs = [(t.name + "/" + label, t.reference, src) for t in tasks for label, src in sorted(t.solutions.items())]
pairs += [(t.name + "/self", t.reference, t.reference.replace("class Model(", "class ModelNew(")) for t in tasks]
opts = VerifyOptions(device="cpu", timing=timing, require_triton=False)
kw = {} if spares == "old" else {"spares": 0 if spares == "off" else concurrency}
with Verifier(device="cpu", max_concurrency=concurrency, **kw) as v:
    v.verify(*pairs[0][1:], opts)  # warm-up (fork-server caches, first spares)
    def one(p):
        r = v.verify(p[1], p[2], opts)
        return p[0], r.status, r.correct, r.speedup, r.details.get("phase_s", {}), r.details.get("children")
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(one, pairs))
    wall = time.perf_counter() - t0
print(json.dumps({"wall_s": wall, "evaluations": len(pairs), "results": results}))
"""


def cell(root: Path, spares: str, timing: str, concurrency: int, n: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CELL, str(root), spares, timing, str(concurrency), str(n)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(root)},
        cwd=root,  # the verifier's children start in the cwd: from this checkout they would import its drkernel
    )
    if out.returncode != 0:
        raise RuntimeError(f"cell {spares}/{timing}/{concurrency} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=10, help="first N tasks of the library (by name)")
    p.add_argument("--rounds", type=int, default=1, help="interleaved repetitions of every cell")
    p.add_argument("--timings", default="cpu_model,measured")
    p.add_argument("--concurrency", default="1,2")
    p.add_argument("--old-worktree", type=Path, default=None, help="also run the verifier of this checkout")
    p.add_argument("--no-off", action="store_true", help="skip this checkout with spares=0 (saves time)")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    variants = [("new", ROOT)] + ([] if a.no_off else [("off", ROOT)])
    variants += [("old", a.old_worktree.resolve())] if a.old_worktree else []
    cells: dict[str, list[dict]] = {}
    load = []
    for _ in range(a.rounds):
        for timing in a.timings.split(","):
            for c in (int(x) for x in a.concurrency.split(",")):
                for name, root in variants:
                    load.append(os.getloadavg()[0])
                    r = cell(root, name, timing, c, a.tasks)
                    cells.setdefault(f"{name}/{timing}/{c}", []).append(r)
                    print(
                        f"{name:4s} {timing:9s} x{c}: {r['evaluations'] / r['wall_s']:.3f} eval/s "
                        f"({r['evaluations']} in {r['wall_s']:.1f} s, load {load[-1]:.1f})",
                        flush=True,
                    )
    summary = {}
    for key, runs in cells.items():
        evals = sum(r["evaluations"] for r in runs)
        wall = sum(r["wall_s"] for r in runs)
        verdicts = {}
        for r in runs:
            for label, status, correct, *_ in r["results"]:
                verdicts.setdefault(label, set()).add((status, correct))
        phases: dict[str, list[float]] = {}
        for r in runs:
            for *_, phase_s, _children in r["results"]:
                for k, v in phase_s.items():
                    phases.setdefault(k, []).append(v)
        summary[key] = {
            "evals_per_s": evals / wall,
            "evaluations": evals,
            "wall_s": wall,
            "mean_phase_s": {k: sum(v) / len(v) for k, v in sorted(phases.items())},
            "self_speedups": [s for r in runs for label, _, _, s, *_ in r["results"] if label.endswith("/self")],
            "verdicts": {k: sorted(map(list, v)) for k, v in verdicts.items()},
        }
    print("\ncell                      eval/s   new/off  new/old")
    for key, s in summary.items():
        name, timing, c = key.split("/")
        if name != "new":
            continue
        off = summary.get(f"off/{timing}/{c}")
        old = summary.get(f"old/{timing}/{c}")
        print(
            f"{key:24s} {s['evals_per_s']:7.3f}  "
            f"{s['evals_per_s'] / off['evals_per_s'] if off else float('nan'):7.2f}  "
            f"{s['evals_per_s'] / old['evals_per_s'] if old else float('nan'):7.2f}"
        )
    mismatched = [
        (k, label)
        for k, s in summary.items()
        for label, v in s["verdicts"].items()
        if v != summary[f"new/{k.split('/', 1)[1]}"]["verdicts"].get(label)
    ]
    print(f"verdicts that differ from the new verifier's: {mismatched or 'none'}")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"load average (1 min) at each cell's start: min {min(load):.1f}, max {max(load):.1f}; {when}")
    a.out.write_text(json.dumps({"cells": summary, "load": load}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
