"""Every shipped task solution traced and replayed in-process exactly as the CPU model's replay child does
(drkernel.verify.cost_model.replay.model_locally, H200 profile): how many replay equal to the reference, and the
spread of their modelled speedups. A check that changes to the replay or the cost model leave honest solutions modelled.

    python benchmarks/library_replay.py [TASK ...]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drkernel.config.verifier import VerifyOptions
from drkernel.tasks import load_tasks
from drkernel.verify.cost_model.replay import model_locally

OPTIONS = VerifyOptions(gpu_profile="h200", atol=1e-2, rtol=1e-2, correctness="strict")


def main(only: list[str]) -> None:
    t0 = time.perf_counter()
    speedups, failed = [], []
    for task in load_tasks():
        if only and task.name not in only:
            continue
        for label, solution in sorted(task.solutions.items()):
            with tempfile.TemporaryDirectory() as workdir:
                m = model_locally(task.reference, solution, workdir, OPTIONS)
            if m["verdict"] == "match":
                speedups.append(m["ref_s"] / m["cand_s"])
            else:
                failed.append(f"{task.name}/{label}: {m['message'][:200]}")
    for line in failed:
        print("FAIL", line)
    speedups.sort()
    total = len(speedups) + len(failed)
    spread = f"{speedups[0]:.2f}-{speedups[-1]:.2f}, median {speedups[len(speedups) // 2]:.2f}" if speedups else "-"
    print(f"{len(speedups)}/{total} replay equal to the reference; modelled speedups {spread}; "
          f"{time.perf_counter() - t0:.0f} s")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
