"""Kernel rewards computed from a verifier verdict.

Recipe default (`speedup`, DR.Kernel's `calculate_reward_speedup`):

    R = 0                                                    if not correct or hack
    R = w_c + w_p * s~ + w_cov * coverage                    otherwise
    s~ = min(speedup, cap), set to 0 when s~ < lower_bound

with w_c = w_p = w_cov = 0.5, cap = 3, lower_bound = 0, so a correct kernel earns R in [0.5, 2.5].
Infra errors are not rewards: the caller masks those samples instead of calling this.

The reward is the caller's choice (trainer config, HTTP request), not part of the verdict's identity:
the verifier returns a verdict, `score` prices it, so cached verdicts survive a change of weights.
"""

from __future__ import annotations

import math

from drkernel.config.algorithm import RewardConfig
from drkernel.types.verify_result import VerifyResult


def _speedup_reward(speedup: float, coverage: float, cfg: RewardConfig) -> float:
    s = min(speedup, cfg.speedup_cap)
    if s < cfg.speedup_lower_bound:
        s = 0.0
    return cfg.correct_weight + cfg.speedup_weight * s + cfg.coverage_weight * coverage


def _weighted_reward(speedup: float, coverage: float, cfg: RewardConfig) -> float:
    faster = 1.0 if speedup >= 1.0 + cfg.speedup_eps else 0.0
    return cfg.correct_weight + cfg.speedup_weight * faster + cfg.coverage_weight * coverage


_TIERS = ((3.0, 1.0), (2.0, 0.8), (1.5, 0.6), (1.2, 0.4), (1.0, 0.2))


def _tiered_reward(compiled: bool, correct: bool, hack: str | None, speedup: float) -> float:
    """KernelBench-like ladder: compile fail -0.5, wrong -0.3, slower -0.1, then 0.2..1.0."""
    if hack is not None:
        return -1.0
    if not compiled:
        return -0.5
    if not correct:
        return -0.3
    for bound, value in _TIERS:
        if speedup >= bound:
            return value
    return -0.1


def reward_range(cfg: RewardConfig | None = None) -> tuple[float, float]:
    """The lowest and highest reward `kernel_reward` can give under `cfg` (plots put their axis there)."""
    cfg = cfg or RewardConfig()
    if cfg.kind == "tiered":
        return -1.0, _TIERS[0][1]
    top = cfg.speedup_cap if cfg.kind == "speedup" else 1.0
    return 0.0, cfg.correct_weight + cfg.speedup_weight * top + cfg.coverage_weight


def kernel_reward(
    correct: bool,
    hack: str | None,
    speedup: float | None,
    coverage: float | None,
    cfg: RewardConfig | None = None,
    compiled: bool = True,
) -> float:
    """Reward of one verified kernel; see the module docstring for the formulas."""
    cfg = cfg or RewardConfig()
    s = 0.0 if speedup is None or not math.isfinite(speedup) else max(speedup, 0.0)
    c = 0.0 if coverage is None or not math.isfinite(coverage) else min(max(coverage, 0.0), 1.0)
    if cfg.kind == "tiered":
        return _tiered_reward(compiled, correct, hack, s)
    if not correct or hack is not None:
        return 0.0
    if cfg.kind == "weighted":
        return _weighted_reward(s, c, cfg)
    return _speedup_reward(s, c, cfg)


def score(result: VerifyResult, cfg: RewardConfig | None = None) -> float:
    """The reward of a verdict under `cfg` (an infra_error gets 0: it is masked, not scored)."""
    if result.status != "ok":
        return 0.0
    return kernel_reward(result.correct, result.hack, result.speedup, result.coverage, cfg, compiled=result.compiled)
