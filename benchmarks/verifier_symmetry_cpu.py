"""CPU evidence for the verifier's timing symmetry and per-evaluation overhead (no GPU needed).

Each reference is submitted as its own candidate (require_triton off): its speedup against itself
should be 1.0 whatever the harness costs, because both runners are timed the same way. Small,
fast references show a fixed per-round-trip or per-call cost charged to one side most clearly.
It prints the self-speedup of every evaluation, their median per reference, and evaluations per
second of one warm Verifier (sequential, then concurrently).

    .venv/bin/python benchmarks/verifier_symmetry_cpu.py --repeats 5 --concurrency 1,2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# `--root PATH` measures the verifier package of another checkout (e.g. `git archive` of an older commit).
_ROOT = Path(sys.argv[sys.argv.index("--root") + 1]) if "--root" in sys.argv else ROOT
sys.path.insert(0, str(_ROOT))

from drkernel.verify import Verifier, VerifyOptions  # noqa: E402

ELEMENTWISE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return {expr}

def get_inputs():
    return [torch.randn({shape})]

def get_init_inputs():
    return []
"""

REFERENCES = {
    "relu_8x512": ELEMENTWISE.format(expr="torch.relu(x)", shape="8, 512"),
    "scale_add_16x256": ELEMENTWISE.format(expr="x * 2.0 + 1.0", shape="16, 256"),
    "sum_64x64": ELEMENTWISE.format(expr="torch.sum(x, dim=1, keepdim=True)", shape="64, 64"),
    "vector_add": (ROOT / "examples" / "vector_add" / "reference.py").read_text(),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5, help="evaluations per reference")
    p.add_argument("--perf-trials", type=int, default=None, help="timed rounds (default: the CPU default)")
    p.add_argument("--concurrency", default="1,2", help="comma list of concurrent evaluations for eval/s")
    p.add_argument("--only", default="", help="comma list of references (default: all)")
    p.add_argument("--root", default=str(ROOT), help="checkout whose drkernel package is measured")
    a = p.parse_args()
    names = [n for n in REFERENCES if not a.only or n in a.only.split(",")]
    upd = {"require_triton": False, "measure_coverage": False}
    if a.perf_trials:
        upd["num_perf_trials"] = a.perf_trials
    opts = VerifyOptions(device="cpu", timeout_s=120).model_copy(update=upd)
    t0 = time.perf_counter()
    with Verifier(device="cpu", max_concurrency=max(int(c) for c in a.concurrency.split(","))) as v:
        print(f"start-up {time.perf_counter() - t0:.2f} s")
        t1 = time.perf_counter()
        first = v.verify(REFERENCES[names[0]], REFERENCES[names[0]], opts)
        print(f"first evaluation {time.perf_counter() - t1:.2f} s (status {first.status}, error {first.error})")
        for c in (int(x) for x in a.concurrency.split(",")):
            jobs = [n for n in names for _ in range(a.repeats)]
            t1 = time.perf_counter()
            with ThreadPoolExecutor(c) as pool:
                results = list(pool.map(lambda n: (n, v.verify(REFERENCES[n], REFERENCES[n], opts)), jobs))
            wall = time.perf_counter() - t1
            print(f"concurrency {c}: {len(jobs)} evaluations in {wall:.1f} s = {len(jobs) / wall:.3f} eval/s")
            for n in names:
                rs = [r for m, r in results if m == n]
                bad = [r.error for r in rs if r.status != "ok" or r.speedup is None]
                sp = [r.speedup for r in rs if r.speedup is not None]
                if bad:
                    print(f"  {n}: errors {bad[:2]}")
                if sp:
                    ms = [round(r.ref_runtime_ms, 4) for r in rs if r.ref_runtime_ms is not None]
                    print(
                        f"  {n:12s} self-speedup median {statistics.median(sp):.3f}  all {[round(s, 3) for s in sp]}"
                        f"  ref ms {ms}  k={rs[0].details.get('calls_per_round')}"
                        f" empty={rs[0].details.get('empty_round_trip_ms')}ms"
                    )


if __name__ == "__main__":
    main()
