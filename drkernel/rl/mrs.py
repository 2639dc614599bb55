"""MRS: mismatch rejection between the rollout engine and the trainer (DR.Kernel section 3).

With delta = logp_train - logp_rollout per sampled token (train = the trainer's recomputed
log-probs, rollout = the inference engine's), a weight w is formed at one of five granularities:

    token:     w_k   = exp(delta_k)                          per token
    turn:      w     = exp(sum_{k in turn} delta_k)          per turn
    turn_geo:  w     = exp(mean_{k in turn} delta_k)         per turn
    sequence:  w     = exp(sum_{k in traj} delta_k)          per trajectory (all its turns)
    geometric: w     = exp(mean_{k in traj} delta_k)         per trajectory (recipe)

and the unit is kept iff lower <= w <= upper (recipe [0.999, 1.001], geometric). Independently,
the token veto masks a whole turn when any of its tokens has exp(delta_k) < tau (recipe 1e-4).
Rejection only clears the response (loss) mask; the turn keeps its place in the TRLOO baseline.

Truncated importance sampling (TIS, off in the recipe): w at token / turn / trajectory level,
w <- min(w, cap), multiplied into the per-token loss.

Tensors are [N, T, L]: trajectory, turn slot, token. Turn granularity is verl's per-row
("sequence") granularity on the [N*T, L] view; trajectory granularity is the same on the
[N, T*L] view. So the threshold tests and TIS weights are verl's `rollout_corr_helper`
functions applied to those two views. verl (0.9.1) has no token veto, so that is ours.

verl's k1 options bound -delta, i.e. the ratio pi_rollout/pi_train; we hand it the reciprocal
bounds so the kept set is exactly lower <= exp(delta) <= upper. verl clamps each token's delta
to +-20 before aggregating, so results differ from the unclamped formula only when some token's
ratio is beyond e^+-20 (the veto already removes the low side of that).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from verl.trainer.ppo.rollout_corr_helper import (
    compute_offpolicy_metrics,
    compute_rollout_correction_weights,
    compute_rollout_rejection_mask,
)

from drkernel.config.algorithm import MRSConfig

_VERL_OPTION = {
    "token": ("token_k1", "turn"),
    "turn": ("seq_sum_k1", "turn"),
    "turn_geo": ("seq_mean_k1", "turn"),
    "sequence": ("seq_sum_k1", "trajectory"),
    "geometric": ("seq_mean_k1", "trajectory"),
}

_TIS_LEVEL = {"token": ("token", "turn"), "turn": ("sequence", "turn"), "sequence": ("sequence", "trajectory")}


@dataclass(frozen=True)
class MismatchRejection:
    """Outcome of MRS: the response mask with rejected tokens cleared, plus metrics."""

    response_mask: torch.Tensor
    metrics: dict[str, float]


def _check(train_log_prob: torch.Tensor, rollout_log_prob: torch.Tensor, response_mask: torch.Tensor) -> None:
    if train_log_prob.dim() != 3:
        raise ValueError(f"log-probs must be [N, T, L], got shape {tuple(train_log_prob.shape)}")
    if rollout_log_prob.shape != train_log_prob.shape or response_mask.shape != train_log_prob.shape:
        raise ValueError(
            "train_log_prob, rollout_log_prob and response_mask must share a shape: "
            f"{tuple(train_log_prob.shape)}, {tuple(rollout_log_prob.shape)}, {tuple(response_mask.shape)}"
        )


def _views(x: torch.Tensor, level: str) -> torch.Tensor:
    n, t, length = x.shape
    return x.reshape(n * t, length) if level == "turn" else x.reshape(n, t * length)


def _log_ratio(train_log_prob: torch.Tensor, rollout_log_prob: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """delta on valid tokens, 0 elsewhere (padding log-probs may be any value, even -inf)."""
    delta = train_log_prob.detach() - rollout_log_prob.detach()
    return torch.where(mask, delta, torch.zeros_like(delta))


def rejection_keep_mask(log_ratio: torch.Tensor, response_mask: torch.Tensor, mode: str, lower: float, upper: float):
    """[N, T, L] bool: tokens whose unit (token/turn/trajectory, per `mode`) has lower <= w <= upper."""
    if mode not in _VERL_OPTION:
        raise ValueError(f"unknown MRS mode {mode!r}; choose from {sorted(_VERL_OPTION)}")
    option, level = _VERL_OPTION[mode]
    if not response_mask.any():
        return response_mask.clone()
    mask_f = response_mask.to(log_ratio.dtype)
    kept, _ = compute_rollout_rejection_mask(
        log_ratio=_views(log_ratio, level),
        response_mask=_views(mask_f, level),
        rollout_rs=option,
        rollout_rs_threshold=f"{1.0 / upper!r}_{1.0 / lower!r}",
    )
    return kept.reshape(log_ratio.shape) > 0


def veto_turn_keep(log_ratio: torch.Tensor, response_mask: torch.Tensor, threshold: float) -> torch.Tensor:
    """[N, T] bool: False for turns holding any valid token with exp(delta) < threshold."""
    vetoed = (log_ratio < math.log(threshold)) & response_mask
    return ~vetoed.any(dim=-1)


def mismatch_metrics(train_log_prob: torch.Tensor, rollout_log_prob: torch.Tensor, response_mask: torch.Tensor):
    """verl's off-policy diagnostics (kl = E[logp_rollout - logp_train], k3, PPL, chi2) over valid
    turns, prefixed 'mismatch/'; empty when no token is valid."""
    n, t, length = train_log_prob.shape
    mask = response_mask.reshape(n * t, length).bool()
    rows = mask.any(dim=-1)
    if not rows.any():
        return {}
    mask = mask[rows]

    def valid(x: torch.Tensor) -> torch.Tensor:
        x = x.detach().reshape(n * t, length)[rows]
        return torch.where(mask, x, torch.zeros_like(x))

    metrics = compute_offpolicy_metrics(
        old_log_prob=valid(train_log_prob), rollout_log_prob=valid(rollout_log_prob), response_mask=mask.float()
    )
    return {f"mismatch/{k}": float(v) for k, v in metrics.items()}


def mismatch_rejection(
    train_log_prob: torch.Tensor,
    rollout_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    cfg: MRSConfig,
) -> MismatchRejection:
    """Apply the configured rejection mode and the token veto to `response_mask` ([N, T, L])."""
    _check(train_log_prob, rollout_log_prob, response_mask)
    mask = response_mask.bool()
    delta = _log_ratio(train_log_prob, rollout_log_prob, mask)
    keep = mask.clone()
    if cfg.mode is not None:
        keep &= rejection_keep_mask(delta, mask, cfg.mode, cfg.effective_lower, cfg.upper)
    turn_valid = mask.any(dim=-1)
    vetoed = torch.zeros_like(turn_valid)
    if cfg.veto_threshold is not None:
        vetoed = turn_valid & ~veto_turn_keep(delta, mask, cfg.veto_threshold)
        keep &= ~vetoed[..., None]
    metrics = mismatch_metrics(train_log_prob, rollout_log_prob, mask)
    metrics.update(rejection_fractions(mask, keep, "mrs"))
    n_valid_turns = max(int(turn_valid.sum()), 1)
    metrics["mrs/veto_turn_fraction"] = float(vetoed.sum()) / n_valid_turns
    return MismatchRejection(response_mask=keep, metrics=metrics)


def rejection_fractions(before: torch.Tensor, after: torch.Tensor, prefix: str) -> dict[str, float]:
    """Fractions of valid tokens, turns and trajectories that lost all their ([N, T, L]) mask."""
    turns_before, turns_after = before.any(-1), after.any(-1)
    traj_before, traj_after = turns_before.any(-1), turns_after.any(-1)

    def frac(b: torch.Tensor, a: torch.Tensor) -> float:
        total = int(b.sum())
        return float((b & ~a).sum()) / total if total else 0.0

    return {
        f"{prefix}/token_rejected_fraction": frac(before, after),
        f"{prefix}/turn_rejected_fraction": frac(turns_before, turns_after),
        f"{prefix}/trajectory_rejected_fraction": frac(traj_before, traj_after),
    }


def truncated_is_weights(
    train_log_prob: torch.Tensor,
    rollout_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    mode: str,
    cap: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """TIS weights [N, T, L]: min(w, cap) at token / turn / trajectory level, 0 on padding, detached."""
    _check(train_log_prob, rollout_log_prob, response_mask)
    mask = response_mask.bool()
    delta = _log_ratio(train_log_prob, rollout_log_prob, mask)
    if mode not in _TIS_LEVEL:
        raise ValueError(f"unknown TIS mode {mode!r}; choose from {sorted(_TIS_LEVEL)}")
    if not mask.any():
        return torch.zeros_like(delta), {}
    verl_mode, level = _TIS_LEVEL[mode]
    weights, metrics = compute_rollout_correction_weights(
        log_ratio=_views(delta, level),
        response_mask=_views(mask.to(delta.dtype), level),
        rollout_is=verl_mode,
        rollout_is_threshold=float(cap),
    )
    return weights.reshape(delta.shape), {f"tis/{k}": float(v) for k, v in metrics.items()}
