"""Every knob of the RL algorithm in one typed config, recipe values as defaults.

The reference hid these behind dataclass defaults that contradicted its scripts (TRLOO silently
became last-turn RLOO) and behind flags nothing read. Here each field is used, documented in one
line, and the defaults are the DR.Kernel recipe (drkernel_spec.md section 9.3).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from drkernel.config.base import StrictModel

Estimator = Literal["trloo", "grpo_mean", "rloo_last_turn"]
MRSMode = Literal["token", "turn", "turn_geo", "sequence", "geometric"]
TISMode = Literal["token", "turn", "sequence"]
LossAggMode = Literal["token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
KLType = Literal["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"]


class RewardConfig(StrictModel):
    """Weights and bounds of the kernel reward."""

    kind: Literal["speedup", "weighted", "tiered"] = Field("speedup", description="reward function")
    correct_weight: float = Field(0.5, description="w_c: reward for a correct, honest kernel")
    speedup_weight: float = Field(0.5, description="w_p: weight of the capped speedup")
    speedup_cap: float = Field(3.0, gt=0, description="U: speedups above this earn no more")
    speedup_lower_bound: float = Field(0.0, ge=0, description="L: capped speedups below this count as 0")
    coverage_weight: float = Field(0.5, ge=0, description="w_cov: weight of Triton time coverage")
    speedup_eps: float = Field(0.01, ge=0, description="'weighted' only: speedup must reach 1+eps")


class TrlooConfig(StrictModel):
    """Advantage estimation over turns."""

    estimator: Estimator = Field("trloo", description="trloo (recipe) | grpo_mean | rloo_last_turn (ablations)")
    gamma: float = Field(1.0, ge=0.0, le=1.0, description="discount of the turn-level reward-to-go")


class MRSConfig(StrictModel):
    """Mismatch rejection: drop data whose trainer/rollout log-prob gap is too large."""

    mode: MRSMode | None = Field("geometric", description="aggregation of exp(logp_train - logp_rollout); null = off")
    lower: float | None = Field(0.999, gt=0, description="keep iff lower <= w; null means 1/upper")
    upper: float = Field(1.001, gt=0, description="keep iff w <= upper")
    veto_threshold: float | None = Field(1e-4, gt=0, lt=1, description="mask a turn with any token ratio below this")
    tis_mode: TISMode | None = Field(None, description="truncated importance weights in the loss; null = off")
    tis_cap: float = Field(2.0, gt=0, description="TIS: weights are min(w, cap)")

    @model_validator(mode="after")
    def _bounds_ordered(self) -> MRSConfig:
        if self.effective_lower > self.upper:
            raise ValueError(f"mrs lower bound {self.effective_lower} exceeds upper bound {self.upper}")
        return self

    @property
    def effective_lower(self) -> float:
        return self.lower if self.lower is not None else 1.0 / self.upper


class PRSConfig(StrictModel):
    """Profiling-based rejection: stochastically drop correct turns with low Triton time coverage."""

    enabled: bool = Field(True, description="apply PRS")
    mode: Literal["turn", "geometric"] = Field("turn", description="one draw per turn, or per trajectory")
    threshold: float = Field(0.3, ge=0, le=1, description="theta: coverage at or below this is always rejected")
    factor: float | None = Field(0.1, ge=0, description="f: keep prob linear over (theta, theta+f]; 0/null = hard")
    speedup_threshold: float | None = Field(None, gt=0, description="always keep turns at least this fast; null = off")
    seed: int = Field(0, description="seed of the PRS Bernoulli sampler")


class FilterConfig(StrictModel):
    """Group-variance filter with a bounded carry-over buffer (DAPO-style dynamic sampling)."""

    enabled: bool = Field(True, description="drop prompt groups with (near) constant last-turn reward")
    min_std: float = Field(1e-3, ge=0, description="groups whose last-turn reward std is below this are dropped")
    min_group_size: int | None = Field(None, ge=1, description="smaller groups are dropped; null = n//2 + 1")
    max_skip_steps: int = Field(5, ge=0, description="consecutive skipped steps before training on what survived")
    max_buffer_groups: int = Field(64, ge=0, description="carry-over buffer capacity in groups (oldest evicted)")
    seed: int = Field(1, description="seed for choosing groups when more than needed survive")


class LossConfig(StrictModel):
    """Dual-clip PPO policy loss (verl core_algos 'vanilla')."""

    clip_ratio_low: float = Field(0.2, gt=0, lt=1, description="eps_low: ratio clipped below at 1 - eps_low")
    clip_ratio_high: float = Field(0.28, gt=0, description="eps_high: ratio clipped above at 1 + eps_high")
    clip_ratio_c: float = Field(3.0, gt=1, description="dual-clip bound c for negative advantages")
    loss_agg_mode: LossAggMode = Field(
        "seq-mean-token-sum-norm", description="verl agg_loss mode; recipe = seq-mean-token-sum / scale factor"
    )
    loss_scale_factor: int = Field(1000, ge=1, description="divisor of the -norm aggregation (recipe 1000)")
    kl_coef: float = Field(0.0, ge=0, description="KL-to-reference loss coefficient (recipe 0)")
    kl_type: KLType = Field("low_var_kl", description="verl kl_penalty estimator for the KL loss")


class AlgorithmConfig(StrictModel):
    """The whole RL algorithm: reward, advantages, rejection, filtering and loss."""

    reward: RewardConfig = Field(default_factory=RewardConfig, description="kernel reward")
    trloo: TrlooConfig = Field(default_factory=TrlooConfig, description="advantage estimator")
    mrs: MRSConfig = Field(default_factory=MRSConfig, description="mismatch rejection and TIS")
    prs: PRSConfig = Field(default_factory=PRSConfig, description="profiling-based rejection")
    filter: FilterConfig = Field(default_factory=FilterConfig, description="group-variance filter")
    loss: LossConfig = Field(default_factory=LossConfig, description="policy loss")
