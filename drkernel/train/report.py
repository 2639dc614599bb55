"""What a finished run reports beyond its per-step metrics: throughput three ways, provenance, plot labels.

Tokens per second are given per step (that step's generated tokens over the time since the previous step
ended), over the RL loop (all tokens over the loop's time) and end to end (all tokens over the whole job,
setup and SFT warm start included): the three answer different questions and are named so.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from drkernel.config.train import TrainConfig


def config_digest(cfg: TrainConfig) -> str:
    """16 hex digits of the resolved config: two runs with the same digest ran the same settings."""
    return hashlib.sha256(json.dumps(cfg.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()[:16]


def speed_source(cfg: TrainConfig) -> str:
    """How the run's speedups were obtained, for plot titles and summaries."""
    options = cfg.verifier.options
    if options.timing == "cpu_model":
        return f"modelled on the {options.gpu_profile} profile"
    return "measured on CPU (interpreter)" if cfg.verifier.device == "cpu" else f"measured on {cfg.verifier.device}"


def throughput(history: list[dict[str, float]], wall_s: float) -> dict[str, Any]:
    """Generated tokens per second per step, over the RL loop and end to end (`wall_s`: the whole job)."""
    tokens = sum(m.get("rollout/tokens", 0.0) for m in history)
    return {
        "tokens_per_s_per_step": [round(m.get("throughput/step_tokens_per_s", 0.0), 1) for m in history],
        "tokens_per_s_rl_loop": round(history[-1].get("throughput/tokens_per_s", 0.0), 1) if history else 0.0,
        "tokens_per_s_end_to_end": round(tokens / wall_s, 1) if wall_s > 0 else 0.0,
    }
