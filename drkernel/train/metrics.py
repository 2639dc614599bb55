"""Per-step metrics to JSONL, TensorBoard and (optionally) wandb, plus trajectory samples as JSONL.

The job calls `write(step, metrics)` once per optimizer step with a flat dict of floats; every sink gets the
same numbers. Ray's dashboard gauges are the Ray layer's (actors/job.py), not this module's.
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

    def close(self) -> None:
        if self._jsonl is not None:
            self._jsonl.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
