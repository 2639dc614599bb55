"""Rewards a set of candidates earn through the whole CPU verifier (library path, `timing: cpu_model`, recipe reward).

Each argument is REFERENCE:CANDIDATE, both files (a bare name is looked up in tests/verify/redteam/); one JSON line
per pair: correct, modelled speedup, coverage, reward, error. Options are the defaults (5 seeds, coverage on) but
for `timing: cpu_model`. Used for the issue-27 before/after table in BENCHMARKS.md (run it from a checkout of each).

    python benchmarks/redteam_rewards.py ref_matmul_1024.py:cpu_model_complex_mm.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from drkernel.rl.rewards import RewardConfig, score  # noqa: E402
from drkernel.verify import Verifier, VerifyOptions  # noqa: E402

REDTEAM = ROOT / "tests" / "verify" / "redteam"


def _read(name: str) -> str:
    path = Path(name)
    return (path if path.exists() else REDTEAM / name).read_text()


def main(pairs: list[str]) -> None:
    options = VerifyOptions(device="cpu", timing="cpu_model", timeout_s=900)
    with Verifier(device="cpu", max_concurrency=1) as verifier:
        for pair in pairs:
            reference, candidate = pair.split(":")
            t0 = time.perf_counter()
            r = verifier.verify(_read(reference), _read(candidate), options)
            row = {
                "reference": reference,
                "candidate": candidate,
                "correct": r.correct,
                "speedup": r.speedup,
                "coverage": r.coverage,
                "reward": score(r, RewardConfig()),
                "error": r.error.message[:200] if r.error else None,
                "seconds": round(time.perf_counter() - t0, 1),
            }
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
