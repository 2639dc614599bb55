"""Dual-clip PPO policy loss, computed by verl's `core_algos` (DR.Kernel section 3.4).

Per valid token, with rho = exp(logp - logp_old) (log-ratio clamped to +-20) and advantage A:

    L_clip = max(-A * rho, -A * clip(rho, 1 - eps_low, 1 + eps_high))      eps = (0.2, 0.28)
    L      = min(L_clip, -A * c)   if A < 0   (dual clip, c = 3)
    L      = L_clip                otherwise
    L     *= w_TIS                 (optional truncated importance weight)

Aggregation (recipe "seq-mean-token-sum" / 1000, which is verl's "seq-mean-token-sum-norm" with
loss_scale_factor 1000): sum L over each row's valid tokens, average over rows with at least one
valid token, divide by the factor. A row is one turn. Plus kl_coef * agg(KL(logp, logp_ref))
when kl_coef > 0 (0 in the recipe).

Everything above is verl's `compute_policy_loss_vanilla`, `agg_loss` and `kl_penalty`, called with
a properly built `ActorConfig`. Ours: the NaN guard for batches whose every token is masked (verl
divides by a zero row count) and the diagnostics (mismatch KL, rejected fractions).
"""

from __future__ import annotations

import torch
from verl.trainer.ppo.core_algos import agg_loss, get_policy_loss_fn, kl_penalty
from verl.workers.config import ActorConfig

from drkernel.config.algorithm import LossConfig
from drkernel.rl.mrs import mismatch_metrics, rejection_fractions


def verl_actor_config(cfg: LossConfig, global_batch_info: dict) -> ActorConfig:
    """The verl ActorConfig carrying our loss knobs; batch/strategy fields are inert for the loss."""
    return ActorConfig(
        strategy="fsdp",
        rollout_n=1,
        ppo_micro_batch_size_per_gpu=1,
        use_torch_compile=False,
        clip_ratio=cfg.clip_ratio_low,
        clip_ratio_low=cfg.clip_ratio_low,
        clip_ratio_high=cfg.clip_ratio_high,
        clip_ratio_c=cfg.clip_ratio_c,
        loss_agg_mode=cfg.loss_agg_mode,
        loss_scale_factor=cfg.loss_scale_factor,
        global_batch_info=dict(global_batch_info),
    )


def _rows(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1, x.shape[-1])


def policy_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    cfg: LossConfig,
    *,
    rollout_is_weights: torch.Tensor | None = None,
    ref_log_prob: torch.Tensor | None = None,
    rollout_log_prob: torch.Tensor | None = None,
    unrejected_mask: torch.Tensor | None = None,
    dp_size: int = 1,
    global_batch_size: int | None = None,
    batch_num_tokens: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Scalar loss and metrics. Tensors are [rows, L] or [N, T, L] (each turn is a row).

    `response_mask` is the final loss mask (after MRS/PRS). `unrejected_mask` (the mask before
    rejection) and `rollout_log_prob` only feed metrics. When the update is split over micro-batches
    or ranks, pass the mini-batch-wide `global_batch_size` (rows with a valid token) and
    `batch_num_tokens` (valid tokens) so every part is normalised alike (verl requires them when
    dp_size > 1); by default they are counted on this call's tensors.
    """
    shape = log_prob.shape
    for name, t in (("old_log_prob", old_log_prob), ("advantages", advantages), ("response_mask", response_mask)):
        if t.shape != shape:
            raise ValueError(f"{name} shape {tuple(t.shape)} != log_prob shape {tuple(shape)}")
    if log_prob.dim() not in (2, 3):
        raise ValueError(f"expected [rows, L] or [N, T, L] tensors, got shape {tuple(shape)}")
    if cfg.kl_coef > 0 and ref_log_prob is None:
        raise ValueError("kl_coef > 0 needs ref_log_prob")
    mask = _rows(response_mask).to(log_prob.dtype)
    info: dict = {"dp_size": dp_size, "loss_scale_factor": cfg.loss_scale_factor}
    if dp_size == 1:
        info["global_batch_size"] = global_batch_size or max(int((mask.sum(-1) > 0).sum()), 1)
        info["batch_num_tokens"] = batch_num_tokens or max(int(mask.sum()), 1)
    else:
        given = {"global_batch_size": global_batch_size, "batch_num_tokens": batch_num_tokens}
        info.update({k: v for k, v in given.items() if v is not None})
    actor_cfg = verl_actor_config(cfg, info)
    loss_fn = get_policy_loss_fn("vanilla")
    loss, verl_metrics = loss_fn(
        old_log_prob=_rows(old_log_prob).detach(),
        log_prob=_rows(log_prob),
        advantages=_rows(advantages).detach(),
        response_mask=mask,
        loss_agg_mode=cfg.loss_agg_mode,
        config=actor_cfg,
        rollout_is_weights=None if rollout_is_weights is None else _rows(rollout_is_weights).detach(),
    )
    metrics = {
        "loss/pg_loss": float(loss.detach()),
        "loss/clipfrac": verl_metrics["actor/pg_clipfrac"],
        "loss/clipfrac_dual": verl_metrics["actor/pg_clipfrac_lower"],
        "loss/ppo_kl": verl_metrics["actor/ppo_kl"],
    }
    if cfg.kl_coef > 0:
        kl = kl_penalty(_rows(log_prob), _rows(ref_log_prob).detach(), cfg.kl_type)
        kl_loss = agg_loss(kl, mask, cfg.loss_agg_mode, **info)
        loss = loss + cfg.kl_coef * kl_loss
        metrics["loss/kl_loss"] = float(kl_loss.detach())

    def as3d(x: torch.Tensor) -> torch.Tensor:
        """[rows, L] -> [rows, 1, L]: without a trajectory axis each row counts as its own."""
        return x if x.dim() == 3 else x.reshape(x.shape[0], 1, x.shape[-1])

    if rollout_log_prob is not None:
        base = response_mask if unrejected_mask is None else unrejected_mask
        metrics.update(mismatch_metrics(as3d(old_log_prob), as3d(rollout_log_prob), as3d(base.bool())))
    if unrejected_mask is not None:
        metrics.update(rejection_fractions(as3d(unrejected_mask.bool()), as3d(response_mask.bool()), "rejected"))
    return loss, metrics
