"""Where a config's SFT warm start lives, and what making it would cost, said before it starts.

A training job without `policy.model_path` runs on the SFT checkpoint of its own config. With `sft.output_dir`
unset that checkpoint lives in one cache per machine (`~/.cache/drkernel/sft`, or $DRKERNEL_SFT_CACHE), in a
folder named by a digest of everything that shapes the weights (model, tokenizer, data and SFT settings; not
the evaluation or logging). So `drkernel sft`, `drkernel demo` and every training job with the same settings
find the same folder, whatever directory Ray copied the job into. A job that would have to make the
checkpoint first says so with the step count and a rough time (`SFTPlan.describe`), or refuses.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from drkernel.config.sft import SFTRecipeConfig

CACHE_ENV = "DRKERNEL_SFT_CACHE"
# Tiny-model SFT on the 2-core dev box ran at 67-72 GFLOP/s on one thread (BENCHMARKS.md, the demo); a second thread
# did not make it faster there, so the estimate never counts on more than one.
CPU_FLOPS = 60e9
CHARS_PER_TOKEN = 2.8  # the tiny BPE: 13.1k tokens for the elementwise pairs' 36.4k characters of reference + solution
FEEDBACK_CHARS = 700  # a rendered feedback message, as the compact feedback turn usually comes out
C = TypeVar("C", bound=SFTRecipeConfig)


class SFTRequired(RuntimeError):
    """The job would have to run SFT first and was told not to (`--no-sft`)."""


def cache_root() -> Path:
    """The machine-wide folder of SFT checkpoints (absolute, outside any Ray working-dir copy)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "drkernel" / "sft").expanduser().resolve()


def shaping_digest(cfg: SFTRecipeConfig) -> str:
    """16 hex digits naming the settings that change the SFT weights; the same settings give the same name."""
    data = cfg.model_dump(mode="json")
    shaping = {k: data[k] for k in ("model", "tokenizer", "data", "sft")}
    shaping["model"].pop("output_dir", None)
    for key in ("output_dir", "eval", "log_every"):
        shaping["sft"].pop(key, None)
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:16]


def with_sft_paths(cfg: C, root: Path | None = None) -> C:
    """`cfg` with `sft.output_dir` (unset: the cache folder of its digest) and `model.output_dir` (unset: beside
    it, `-base`) filled in; settings already given are kept."""
    sft_dir = cfg.sft.output_dir or str((root or cache_root()) / shaping_digest(cfg))
    data = cfg.model_dump()
    data["sft"]["output_dir"] = sft_dir
    data["model"]["output_dir"] = cfg.model.output_dir or f"{sft_dir}-base"
    return type(cfg).model_validate(data)


def is_complete(checkpoint: str | Path) -> bool:
    """A finished `run_sft_stage` folder: the model's config and the stage's summary, which it writes last."""
    path = Path(checkpoint)
    return (path / "config.json").is_file() and (path / "summary.json").is_file()


@dataclass(frozen=True)
class SFTPlan:
    """What the warm start of a config would do, counted before any of it runs."""

    checkpoint: str
    examples: int
    second_turn_examples: int
    steps: int
    eval_answers: int
    device: str
    estimate_s: float | None

    def describe(self) -> str:
        """One paragraph for the log, before the SFT starts."""
        extra = (
            f" ({self.second_turn_examples} second turns first judged by the verifier)"
            if self.second_turn_examples
            else ""
        )
        if self.estimate_s is not None:
            when = f"roughly {_minutes(self.estimate_s)} of training on an idle CPU (longer on a busy one)"
        else:
            when = f"no time estimate for device {self.device}"
        text = f"SFT warm start: {self.steps} optimizer steps over up to {self.examples} examples{extra}, {when}"
        if self.eval_answers:
            text += f", then {self.eval_answers} sampled answers verified (sft.eval.enabled=false skips them)"
        return f"{text}; the checkpoint goes to {self.checkpoint}"


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def _tiny_params(cfg: SFTRecipeConfig) -> int:
    m = cfg.model
    attention = m.hidden_size * m.head_dim * (2 * m.num_heads + 2 * m.num_kv_heads)
    layer = attention + 3 * m.hidden_size * m.intermediate_size
    return (m.vocab_size or cfg.tokenizer.vocab_size) * m.hidden_size * (
        1 if m.tie_word_embeddings else 2
    ) + m.num_layers * layer


def plan_sft(cfg: SFTRecipeConfig) -> SFTPlan:
    """Count the examples and steps `run_sft_stage(cfg)` would take and estimate its time on a CPU (the tiny
    model only: a base model's speed depends on hardware this cannot know)."""
    from drkernel.sft.feedback import BETTER, FIRST
    from drkernel.sft.trainer import torch_device
    from drkernel.tasks import load_tasks

    tasks = load_tasks(Path(cfg.data.tasks_dir) if cfg.data.tasks_dir else None, cfg.data.categories)
    if cfg.data.sft_file:
        import pyarrow.parquet as pq

        examples, chars, second = pq.ParquetFile(cfg.data.sft_file).metadata.num_rows, None, 0
    else:
        examples = sum(len(t.solutions) for t in tasks)
        chars = sum(len(t.reference) * len(t.solutions) + sum(map(len, t.solutions.values())) for t in tasks)
        both = [t for t in tasks if FIRST in t.solutions and BETTER in t.solutions] if cfg.data.feedback_turns else []
        second = len(both)
        chars += sum(
            len(t.reference) + len(t.solutions[FIRST]) + len(t.solutions[BETTER]) + FEEDBACK_CHARS for t in both
        )
    n = examples + second
    s = cfg.sft
    per_step = s.micro_batch_size * s.grad_accum_steps
    steps = s.epochs * math.ceil(n / per_step) if n else 0
    steps = min(steps, s.max_steps) if s.max_steps else steps
    device = str(torch_device(s.device))
    estimate = None
    if device == "cpu" and s.base_model is None and chars is not None and n:
        tokens_per_step = chars / CHARS_PER_TOKEN / n * min(per_step, n)
        estimate = steps * 6 * _tiny_params(cfg) * tokens_per_step / CPU_FLOPS
    modes = int(s.eval.greedy) + int(s.eval.temperature > 0)
    return SFTPlan(
        checkpoint=str(s.output_dir),
        examples=n,
        second_turn_examples=second,
        steps=steps,
        eval_answers=len(tasks) * modes if s.eval.enabled else 0,
        device=device,
        estimate_s=estimate,
    )
