"""The evaluation's numbers, from per-sample records: fast@p, pass@k, fast_p@k, rates, hack rates.

Definitions (what a reader needs to compare with KernelBench and the DR.Kernel paper):
- A turn *succeeds at p* when the verifier reached a verdict, the kernel is correct, no hack was flagged and its
  speedup is strictly greater than p (KernelBench's `fast_p` uses `speedup > p`); p = 0 asks only for a correct,
  honest kernel (any speedup, even a missing one, counts).
- `fast@p` is the share of *all* samples that succeed at p, as KernelBench counts it: a sample that errored, timed
  out, wrote no code, was flagged as a hack or got no verdict (infra error) is a failure, never dropped. The job's
  `rollout/fast1` is a different number (faster among *correct turns* only); do not confuse the two.
- Per turn t: the sample's t-th turn alone (a sample that stopped before turn t fails it). Best-so-far by turn t:
  the sample succeeds when any of its turns 1..t does (sequential test-time scaling extends t past one round).
- `pass@k` / `fast_p@k`: Chen et al.'s unbiased estimator 1 - C(n-c, k) / C(n, k) per task over its n samples
  (c succeed on some turn), averaged over tasks.
- Rates (compile, correct, hack per category) and the mean reward are over every turn of every sample; a sample
  that errored before any turn counts as one failed turn with reward 0, so errors lower every rate. "correct"
  means correct and unflagged, as the job's `rollout/correct_rate` (which divides by judged turns only: the two
  agree when no turn met an infrastructure error).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

FAST_P = (0.0, 1.0, 1.2, 1.5, 2.0, 3.0)
COMPARISON = "speedup > p (KernelBench's fast_p); p = 0 means correct"


@dataclass(frozen=True)
class TurnOutcome:
    """What the verifier made of one turn (status "format" = no closed code block, "infra_error" = no verdict)."""

    status: str = "ok"
    compiled: bool = False
    correct: bool = False
    hack: str | None = None
    speedup: float | None = None
    reward: float = 0.0

    def succeeds(self, p: float) -> bool:
        """Correct, honest, judged, and for p > 0 strictly faster than p times the reference."""
        if self.status != "ok" or not self.correct or self.hack is not None:
            return False
        if p <= 0:
            return True
        return self.speedup is not None and math.isfinite(self.speedup) and self.speedup > p


@dataclass
class SampleRecord:
    """One sample of one task: its turns in order (over every round), or the error that ended it first."""

    task: str
    sample: int
    turns: list[TurnOutcome] = field(default_factory=list)
    error: str | None = None
    kernel: str | None = None  # the best judged kernel, for readers of the records (not used by any metric)
    last_text: str | None = None  # the end of the last response, so a reader sees what a failing sample wrote

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "turns": [asdict(t) for t in self.turns]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SampleRecord:
        turns = [TurnOutcome(**t) for t in data["turns"]]
        return cls(
            data["task"], int(data["sample"]), turns, data.get("error"), data.get("kernel"), data.get("last_text")
        )

    def succeeds_by(self, turn: int, p: float) -> bool:
        """Some turn among the first `turn` succeeds at p."""
        return any(t.succeeds(p) for t in self.turns[:turn])

    def succeeds_at(self, turn: int, p: float) -> bool:
        """The `turn`-th turn (1-based) exists and succeeds at p."""
        return len(self.turns) >= turn and self.turns[turn - 1].succeeds(p)


def unbiased_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. (2021): the chance that k of n samples, c of them successes, hold at least one success."""
    if not 0 <= c <= n or k < 1:
        raise ValueError(f"need 0 <= c <= n and k >= 1, got n={n} c={c} k={k}")
    if k > n:
        raise ValueError(f"k={k} exceeds the {n} samples drawn")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _key(p: float) -> str:
    return f"fast@{p:g}"


def summarize(
    records: Sequence[SampleRecord], ps: Sequence[float] = FAST_P, ks: Sequence[int] = (1,)
) -> dict[str, Any]:
    """Every metric of the module docstring over `records` (one task may appear with several samples)."""
    if not records:
        raise ValueError("no samples to summarize")
    seen: set[tuple[str, int]] = set()
    for r in records:
        if (r.task, r.sample) in seen:
            raise ValueError(f"sample {r.sample} of task {r.task} appears twice")
        seen.add((r.task, r.sample))
    n = len(records)
    horizon = max((len(r.turns) for r in records), default=0)
    turns = [t for r in records for t in r.turns]
    failed_before_any = sum(1 for r in records if not r.turns)
    slots = len(turns) + failed_before_any  # an error before any turn is one failed turn
    hacks = Counter(t.hack for t in turns if t.hack is not None)
    out: dict[str, Any] = {
        "comparison": COMPARISON,
        "tasks": len({r.task for r in records}),
        "samples": n,
        "samples_errored": sum(1 for r in records if r.error is not None),
        "turns_scored": slots,
        "turns_infra_error": sum(1 for t in turns if t.status == "infra_error"),
        "format_rate": sum(t.status != "format" for t in turns) / slots,
        "compile_rate": sum(t.compiled for t in turns) / slots,
        "correct_rate": sum(t.succeeds(0.0) for t in turns) / slots,
        "hack_rate": sum(hacks.values()) / slots,
        "hack_rate_by_category": {name: count / slots for name, count in sorted(hacks.items())},
        "reward_mean": sum(t.reward for t in turns if t.status == "ok") / slots,
        "max_turns": horizon,
    }
    out["best"] = {_key(p): sum(r.succeeds_by(horizon, p) for r in records) / n for p in ps}
    out["per_turn"] = [
        {_key(p): sum(r.succeeds_at(t, p) for r in records) / n for p in ps} for t in range(1, horizon + 1)
    ]
    out["best_by_turn"] = [
        {_key(p): sum(r.succeeds_by(t, p) for r in records) / n for p in ps} for t in range(1, horizon + 1)
    ]
    by_task: dict[str, list[SampleRecord]] = {}
    for r in records:
        by_task.setdefault(r.task, []).append(r)
    smallest = min(len(v) for v in by_task.values())
    at_k: dict[str, float] = {}
    for k in ks:
        if k > smallest:
            continue  # a task with fewer samples than k cannot be scored at k
        at_k[f"pass@{k}"] = _mean(
            [unbiased_at_k(len(v), sum(r.succeeds_by(horizon, 0.0) for r in v), k) for v in by_task.values()]
        )
        for p in ps:
            if p > 0:
                at_k[f"fast_{p:g}@{k}"] = _mean(
                    [unbiased_at_k(len(v), sum(r.succeeds_by(horizon, p) for r in v), k) for v in by_task.values()]
                )
    out["at_k"] = at_k
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)
