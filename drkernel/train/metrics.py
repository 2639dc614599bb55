"""Per-step metrics to JSONL, TensorBoard and (optionally) wandb, plus what became of every trajectory.

The job calls `write(step, metrics)` once per optimizer step with a flat dict of floats; every sink gets the
same numbers. Ray's dashboard gauges are the Ray layer's (actors/job.py), not this module's.

`write_outcomes` writes, per step, outcomes.jsonl (one line per trajectory: ids, per-turn category, reward and
speedup, and the outcome with its detail, drkernel.train.decisions; one line per group dropped as stale or
failed) and samples.jsonl (the whole turns of up to logging.report_samples_per_step trajectories, each with its
outcome). samples.jsonl keeps the keys it had (step, group_id, task_uid, end_reason, turns[turn, version,
reward, masked, kernel, feedback, verdict]) and adds sample_index, prompt, outcome, detail and per turn
category, response, finish_reason and decision; kernels and feedback are no longer cut at 2,000 characters but
at logging.sample_text_chars, and a sample is written every step instead of every logging.samples_every.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


class MetricsWriter:
    """Fans one step's metrics out to the enabled sinks; close() flushes them."""

    def __init__(
        self,
        out_dir: str | Path,
        jsonl: bool = True,
        tensorboard: bool = True,
        wandb: bool = False,
        wandb_project: str = "drkernel-ray",
        run_config: dict[str, Any] | None = None,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._jsonl = (self.out_dir / "metrics.jsonl").open("a") if jsonl else None
        self._samples = self.out_dir / "samples.jsonl"
        self._outcomes = self.out_dir / "outcomes.jsonl"
        self._held: dict[tuple[str, int], dict[str, Any]] = {}  # buffered by the filter: their summary, for later
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(self.out_dir / "tb"))
        self._wandb = None
        if wandb:
            import wandb as wandb_lib

            self._wandb = wandb_lib.init(project=wandb_project, config=run_config or {}, dir=str(self.out_dir))

    def write(self, step: int, metrics: dict[str, float]) -> None:
        clean = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and math.isfinite(v)}
        if self._jsonl is not None:
            self._jsonl.write(json.dumps({"step": step, **clean}) + "\n")
            self._jsonl.flush()
        if self._tb is not None:
            for key, value in clean.items():
                self._tb.add_scalar(key, value, step)
        if self._wandb is not None:
            self._wandb.log(clean, step=step)

    def write_samples(self, step: int, samples: list[dict[str, Any]]) -> None:
        """Trajectory samples (per turn: kernel, feedback, verdict, reward) for humans to read."""
        with self._samples.open("a") as f:
            for sample in samples:
                f.write(json.dumps({"step": step, **sample}, default=str) + "\n")

    def write_outcomes(
        self,
        step: int,
        trajectories: list[dict[str, Any]],
        decisions: list[dict[str, Any]],
        dropped: list[dict[str, Any]],
        failed: list[dict[str, str]],
        samples: list[dict[str, Any]],
    ) -> dict[str, float]:
        """One line per trajectory trained on this step (joined with the trainer's decision), per group dropped
        or failed since the last step, and the step's samples; returns `outcomes/<outcome>` counts."""
        decided = {(d["group_id"], d["sample_index"]): d for d in decisions}
        lines = [_joined(step, row, decided.get((row["group_id"], row["sample_index"]))) for row in trajectories]
        known = {(r["group_id"], r["sample_index"]) for r in trajectories}
        for key, d in decided.items():  # trained from the filter's buffer: their summary came with an earlier step
            if key not in known:
                held = self._held.pop(key, {"group_id": key[0], "sample_index": key[1], "turns": []})
                lines.append(_joined(step, held, d))
        for line in lines:
            if line["outcome"] == "buffered":
                summary = {k: v for k, v in line.items() if k not in ("step", "outcome", "detail")}
                self._held[line["group_id"], line["sample_index"]] = summary
        for g in dropped:
            lines += [
                {"step": step, "group_id": g["group_id"], "sample_index": i, "task_uid": g["task_uid"], "turns": []}
                | {"outcome": "dropped_stale", "detail": g["detail"]}
                for i in g["samples"]
            ]
        lines += [
            {"step": step, "group_id": f["group_id"], "sample_index": None, "turns": [], "outcome": "failed"}
            | {"detail": f["error"]}
            for f in failed
        ]
        counts: dict[str, float] = {}
        for line in lines:
            counts[f"outcomes/{line['outcome']}"] = counts.get(f"outcomes/{line['outcome']}", 0.0) + 1.0
        with self._outcomes.open("a") as f:
            f.writelines(json.dumps(line, default=str) + "\n" for line in lines)
        self.write_samples(
            step, [_joined(step, s, decided.get((s["group_id"], s["sample_index"])), "decision") for s in samples]
        )
        return counts

    def close(self) -> None:
        if self._jsonl is not None:
            self._jsonl.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def _joined(step: int, row: dict[str, Any], decision: dict[str, Any] | None, only: str | None = None) -> dict[str, Any]:
    """`row` (a trajectory's summary or whole record) with the trainer's decision: the outcome, why, and per turn
    what the decision says (all of it, or only the key `only`)."""
    d = decision or {"outcome": "undecided", "detail": "", "turns": []}
    by_turn = {t["turn"]: {k: v for k, v in t.items() if k != "turn"} for t in d["turns"]}
    turns = []
    for t in row["turns"]:
        extra = by_turn.get(t["turn"], {})
        turns.append(t | ({only: extra.get(only)} if only else extra))
    return {"step": step, **row, "turns": turns, "outcome": d["outcome"], "detail": d["detail"]}
