"""How many timed rounds each stopping rule would have used, and the speedups it would have reported, replayed
on rounds the verifier recorded with every round timed (`verifier_bench.py --timing-precision 0`, which keeps
each evaluation's `rounds_ms`). One recording serves every rule, so the rules are compared on the same rounds.

    python benchmarks/timing_rules_replay.py benchmarks/results/verifier_h200_session9/every_round_precision0.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drkernel.verify.judging.precision import enough_rounds

RULES = {  # name: (precision, budget_s)
    "every round": (0.0, 0.0),
    "1% only": (0.01, 0.0),
    "1%, 3% after 0.25 s (default)": (0.01, 0.25),
    "1%, 3% after 0.10 s": (0.01, 0.10),
}


def replay(result: dict, precision: float, budget_s: float, min_rounds: int) -> tuple[int, float, float]:
    """(rounds, seconds of timed rounds, speedup) under one rule. A round's cost is the evaluation's measured
    cost of its timed rounds (warm-ups included) spread evenly."""
    timing = result["timing"]
    cand, ref = timing["rounds_ms"]["candidate"], timing["rounds_ms"]["reference"]
    per_round = sum(timing["timed_round_s"].values()) / (len(cand) + 3)
    ratios = [c / r for c, r in zip(cand, ref)]
    n = next(
        i
        for i in range(1, len(ratios) + 1)
        if enough_rounds(ratios[:i], precision, min_rounds, len(ratios), i * per_round, budget_s)
    )
    return n, n * per_round, statistics.median(ref[:n]) / statistics.median(cand[:n])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bench_json", type=Path)
    p.add_argument("--min-rounds", type=int, default=10)
    a = p.parse_args()
    results = [
        r
        for run in json.loads(a.bench_json.read_text())["ours"]
        for r in run["results"]
        if (r.get("timing") or {}).get("rounds_ms")
    ]
    for name, (precision, budget) in RULES.items():
        rows = [replay(r, precision, budget, a.min_rounds) for r in results]
        selfs = [sp for r, (_, _, sp) in zip(results, rows) if r["label"].endswith("(self)")]
        within = sum(abs(s - 1) <= 0.03 for s in selfs)
        print(
            f"{name:32s} rounds mean {statistics.mean(n for n, _, _ in rows):5.1f}, timed-round seconds "
            f"{sum(s for _, s, _ in rows):5.2f} over {len(rows)} evaluations, self-speedups within 1.00 +- 0.03: "
            f"{within}/{len(selfs)} ({', '.join(f'{s:.3f}' for s in selfs)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
