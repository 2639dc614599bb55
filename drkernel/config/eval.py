"""Settings of `drkernel eval` and of the validation a training job runs every few steps (same code)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from drkernel.config.base import StrictModel

ReferenceMode = Literal["eager", "compile"]


class EvalConfig(StrictModel):
    """How a policy is measured: k samples of T turns per task, optionally several scaling rounds."""

    samples_per_task: int = Field(4, ge=1, description="k: samples drawn per task")
    max_turns: int | None = Field(None, ge=1, description="T: turns per round; null = rollout.max_turns")
    rounds: int = Field(1, ge=1, description="sequential test-time scaling rounds, each from the best kernel so far")
    temperature: float | None = Field(None, ge=0, description="sampling temperature; null = rollout.temperature")
    pass_k: list[int] = Field(default_factory=lambda: [1], description="k values of pass@k and fast_p@k")
    fast_p: list[float] = Field(
        default_factory=lambda: [0.0, 1.0, 1.2, 1.5, 2.0, 3.0], description="speedup thresholds p of fast@p"
    )
    tasks_at_once: int = Field(4, ge=1, description="tasks evaluated concurrently (each with its k samples)")
    sample_timeout_s: float = Field(1800.0, gt=0, description="a round of one sample past this is a failed sample")
    reference: ReferenceMode = Field(
        "eager", description="time candidates against the eager or torch.compile reference"
    )


class ValidationConfig(StrictModel):
    """Validation inside a training job: the policy's current weights evaluated on held-out tasks every v steps."""

    every_steps: int = Field(0, ge=0, description="v: validate every v optimizer steps (and at step 0); 0 = never")
    prompt_file: str | None = Field(None, description="parquet of held-out task rows; null = data.tasks_dir tasks")
    tasks: list[str] | None = Field(None, description="task names to keep (extra_info.name); null = all")
    samples_per_task: int = Field(2, ge=1, description="k of each validation")
    max_turns: int | None = Field(None, ge=1, description="T of each validation; null = rollout.max_turns")
    temperature: float | None = Field(None, ge=0, description="sampling temperature; null = rollout.temperature")
