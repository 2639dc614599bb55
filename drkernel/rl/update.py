"""One optimizer step of the policy on a StepBatch (drkernel_spec.md section 0, steps 6-12).

1. A no-grad pass recomputes the trainer's log-prob of every sampled token over whole multi-turn sequences
   ("old" log-probs; the recipe recomputes them, it does not reuse the engine's).
2. MRS compares them with the engine's log-probs and clears rejected tokens; PRS (decided when the batch was
   built) clears its turns. Optional TIS weights come from the same comparison.
3. The loss normalisers (turn rows with a valid token, valid tokens) are counted over the whole step, summed
   over data-parallel ranks, so micro-batching and sharding change memory, not the gradient.
4. A grad pass per micro-batch: dual-clip PPO loss (drkernel.rl.loss, verl's core_algos), backward.
5. Clip the gradient norm, step (skipped when the norm is not finite or nothing survived rejection).

Log-probs are computed only at response positions, and there in chunks of `chunk_tokens` through verl's
FusedLinearForPPO, which recomputes each chunk's logits in backward: neither the [B, S, V] logits nor the
[R, V] logits of all R response tokens ever exist, only one chunk's in fp32. Logits are divided by the
sampling temperature, matching the engine's log-probs of the processed distribution (temperature is the only
processor the rollout uses when top_k = 0 and top_p = 1).

With data parallelism (FSDP2) every rank must run the same number of forward passes: ranks with fewer
micro-batches run zero-weight dummy ones.
"""

from __future__ import annotations

import math
import time

import torch
import torch.distributed as dist
from torch import nn
from verl.utils.experimental.torch_functional import FusedLinearForPPO

from drkernel.config.algorithm import AlgorithmConfig
from drkernel.model.attention import fused_attention
from drkernel.rl.loss import policy_loss
from drkernel.rl.mrs import mismatch_rejection, truncated_is_weights
from drkernel.rl.step_batch import StepBatch


class ResponseScorer(nn.Module):
    """Wraps a causal LM so one call returns per-position log-probs (and entropies) of the next tokens.

    As a module of its own it can be the FSDP2 root: its forward then unshards the embeddings, final norm
    and LM head that the decoder-layer shards do not cover.
    """

    def __init__(self, policy: nn.Module, chunk_tokens: int = 1024, fused_attention_only: bool = False) -> None:
        super().__init__()
        self.policy = policy
        self.head = FusedLinearForPPO(chunk_size=chunk_tokens)
        self.fused_attention_only = fused_attention_only  # drkernel.model.attention: no S x S math fallback

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        targets: torch.Tensor,
        temperature: float = 1.0,
        with_entropy: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """[B, S] log p(input_ids[:, p] | prefix) where `targets[:, p]`, 0 elsewhere (p = 0 never counts)."""
        with fused_attention(self.fused_attention_only):
            hidden = self.policy.get_decoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        keep = targets[:, 1:].bool()
        lm_head = self.policy.get_output_embeddings()
        if getattr(lm_head, "bias", None) is not None:
            raise ValueError("ResponseScorer's chunked LM head takes a head without bias (Qwen3's has none)")
        logp, ent = self.head(hidden[:, :-1][keep], lm_head.weight, input_ids[:, 1:][keep], temperature)
        out = torch.zeros(input_ids.shape, dtype=torch.float32, device=logp.device)
        out[:, 1:][keep] = logp
        entropy = None
        if with_entropy:
            entropy = torch.zeros(input_ids.shape, dtype=torch.float32, device=logp.device)
            entropy[:, 1:][keep] = ent.detach().float()
        return out, entropy


def as_scorer(model: nn.Module) -> ResponseScorer:
    return model if isinstance(model, ResponseScorer) else ResponseScorer(model)


def _device(model: nn.Module) -> torch.device:
    param = next(model.parameters())
    local = getattr(param, "to_local", None)
    return local().device if local is not None else param.device


def _all_reduce(values: list[float], op: dist.ReduceOp, dp_size: int, device: torch.device) -> list[float]:
    if dp_size == 1:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=op)
    return t.tolist()


def _micro_batches(n: int, size: int, dp_size: int, device: torch.device) -> tuple[list[list[int]], int]:
    """This rank's micro-batches, and how many passes every rank must run (the maximum over ranks)."""
    chunks = [list(range(i, min(i + size, n))) for i in range(0, n, size)]
    passes = int(_all_reduce([float(len(chunks))], dist.ReduceOp.MAX, dp_size, device)[0])
    return chunks, passes


def _dummy_pass(scorer: ResponseScorer, device: torch.device, backward: bool) -> None:
    """A one-token forward (and zero-weight backward) that keeps FSDP collectives in step across ranks."""
    ids = torch.zeros(1, 2, dtype=torch.long, device=device)
    mask = torch.ones_like(ids)
    logp, _ = scorer(ids, mask, mask)
    if backward:
        (logp.sum() * 0.0).backward()


@torch.no_grad()
def recompute_log_probs(
    scorer: ResponseScorer, batch: StepBatch, micro_batch_size: int, temperature: float, dp_size: int = 1
) -> torch.Tensor:
    """[N, T, L] trainer log-probs of every sampled token, in the batch's turn layout (no grad)."""
    device = _device(scorer)
    chunks, passes = _micro_batches(batch.num_rows, micro_batch_size, dp_size, device)
    out = torch.zeros(batch.turn_positions.shape, dtype=torch.float32)
    for k in range(passes):
        if k >= len(chunks):
            _dummy_pass(scorer, device, backward=False)
            continue
        micro = batch.select(chunks[k])
        logp, _ = scorer(
            micro.input_ids.to(device), micro.attention_mask.to(device), micro.token_turn.to(device) >= 0, temperature
        )
        out[chunks[k], :, : micro.turn_positions.shape[-1]] = micro.to_turns(logp.float().cpu())
    return out


def loss_masks(
    batch: StepBatch, old_log_prob: torch.Tensor, cfg: AlgorithmConfig
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, dict[str, float]]:
    """(unrejected mask, loss mask after MRS and PRS, TIS weights or None, metrics), all [N, T, L]."""
    unrejected = batch.to_turns(batch.response_mask)
    rollout = batch.to_turns(batch.rollout_log_probs)
    mrs = mismatch_rejection(old_log_prob, rollout, unrejected, cfg.mrs)
    loss_mask = mrs.response_mask & batch.prs_keep[..., None]
    tis, metrics = None, dict(mrs.metrics)
    if cfg.mrs.tis_mode is not None:
        tis, tis_metrics = truncated_is_weights(old_log_prob, rollout, loss_mask, cfg.mrs.tis_mode, cfg.mrs.tis_cap)
        metrics.update(tis_metrics)
    return unrejected, loss_mask, tis, metrics


def accumulate_gradients(
    model: nn.Module,
    batch: StepBatch,
    cfg: AlgorithmConfig,
    micro_batch_size: int,
    temperature: float = 1.0,
    dp_size: int = 1,
    masks: dict[str, torch.Tensor] | None = None,
) -> dict[str, float]:
    """Passes 1-4 of the module docstring: leaves the step's gradient in `.grad`; returns metrics. `masks`, when
    given, receives the per-row decisions' inputs: `unrejected`, `loss_mask` and `old_log_prob` ([N, T, L])."""
    scorer = as_scorer(model)
    device = _device(scorer)
    old = recompute_log_probs(scorer, batch, micro_batch_size, temperature, dp_size)
    unrejected, loss_mask, tis, metrics = loss_masks(batch, old, cfg)
    if masks is not None:
        masks.update(unrejected=unrejected, loss_mask=loss_mask, old_log_prob=old)
    rows_local = float(loss_mask.any(-1).sum())
    tokens_local = float(loss_mask.sum())
    rows, tokens = _all_reduce([rows_local, tokens_local], dist.ReduceOp.SUM, dp_size, device)
    metrics.update({"train/loss_rows": rows, "train/loss_tokens": tokens})
    if tokens == 0:
        return metrics
    chunks, passes = _micro_batches(batch.num_rows, micro_batch_size, dp_size, device)
    advantages = batch.to_turns(batch.advantages)
    sums = {"loss": 0.0, "clip": 0.0, "entropy": 0.0, "tokens": 0.0}
    for k in range(passes):
        if k >= len(chunks):
            _dummy_pass(scorer, device, backward=True)
            continue
        rows_k = chunks[k]
        micro = batch.select(rows_k)
        length = micro.turn_positions.shape[-1]
        mask_k = loss_mask[rows_k, :, :length]
        logp, entropy = scorer(
            micro.input_ids.to(device),
            micro.attention_mask.to(device),
            micro.token_turn.to(device) >= 0,
            temperature,
            with_entropy=True,
        )
        logp_t = micro.to_turns(logp)
        loss, m = policy_loss(
            logp_t,
            old[rows_k, :, :length].to(device),
            advantages[rows_k, :, :length].to(device),
            mask_k.to(device),
            cfg.loss,
            rollout_is_weights=None if tis is None else tis[rows_k, :, :length].to(device),
            dp_size=dp_size,
            global_batch_size=max(int(rows), 1),
            batch_num_tokens=max(int(tokens), 1),
        )
        loss.backward()
        n_tok = float(mask_k.sum())
        sums["loss"] += float(loss.detach())
        sums["clip"] += float(m["loss/clipfrac"]) * n_tok
        sums["entropy"] += float(micro.to_turns(entropy.cpu())[mask_k].sum())
        sums["tokens"] += n_tok
    n_tok = max(sums["tokens"], 1.0)
    metrics.update(
        {
            "train/pg_loss": sums["loss"],
            "train/clip_fraction": sums["clip"] / n_tok,
            "train/entropy": sums["entropy"] / n_tok,
            "train/rejected_token_fraction": 1.0 - tokens_local / max(float(unrejected.sum()), 1.0),
        }
    )
    return metrics


def update_effect(
    scorer: ResponseScorer,
    batch: StepBatch,
    before: torch.Tensor,
    loss_mask: torch.Tensor,
    micro_batch_size: int,
    temperature: float,
    dp_size: int = 1,
) -> dict[str, float]:
    """What the step did to the turns it trained on, by the trainer's own forward pass: the mean change of a turn's
    summed log-prob over its loss tokens, among positive- and among negative-advantage turns. An update that
    learns from its batch raises the first and lowers the second; a sign, mask or alignment error would not."""
    after = recompute_log_probs(scorer, batch, micro_batch_size, temperature, dp_size)
    delta = ((after - before) * loss_mask).sum(-1)
    trained = loss_mask.any(-1)
    adv = batch.turn_advantages
    sums = []
    for side in (trained & (adv > 0), trained & (adv < 0)):
        sums += [float(delta[side].sum()), float(side.sum())]
    sums = _all_reduce(sums, dist.ReduceOp.SUM, dp_size, _device(scorer))
    return {
        "train/update_logp_pos": sums[0] / sums[1] if sums[1] else 0.0,
        "train/update_logp_neg": sums[2] / sums[3] if sums[3] else 0.0,
    }


def _grad_norm(params: list[torch.Tensor], max_norm: float) -> float:
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    full = getattr(norm, "full_tensor", None)
    return float(full() if full is not None else norm)


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: StepBatch,
    cfg: AlgorithmConfig,
    *,
    micro_batch_size: int,
    max_grad_norm: float,
    lr: float | None = None,
    temperature: float = 1.0,
    dp_size: int = 1,
    measure_effect: bool = False,
    masks: dict[str, torch.Tensor] | None = None,
) -> dict[str, float]:
    """One update on `batch` (this rank's share when dp_size > 1); returns the step's metrics.

    No optimizer step happens for a skipped batch, when MRS/PRS left no token, or when the gradient norm is
    not finite (`train/stepped` says which); gradients are cleared either way. `measure_effect` adds
    `update_effect`'s metrics at the cost of two more forward passes; `masks` as in `accumulate_gradients`.
    """
    start = time.perf_counter()
    if lr is not None:
        for group in optimizer.param_groups:
            group["lr"] = lr
    metrics = dict(batch.metrics)
    metrics["train/lr"] = float(optimizer.param_groups[0]["lr"])
    if batch.skipped:
        metrics["train/stepped"] = 0.0
        return metrics
    optimizer.zero_grad(set_to_none=True)
    if measure_effect:
        before = recompute_log_probs(as_scorer(model), batch, micro_batch_size, temperature, dp_size)
        loss_mask = loss_masks(batch, before, cfg)[1]
    metrics.update(accumulate_gradients(model, batch, cfg, micro_batch_size, temperature, dp_size, masks))
    stepped = False
    if metrics["train/loss_tokens"] > 0:
        params = [p for p in model.parameters() if p.requires_grad]
        grad_norm = _grad_norm(params, max_grad_norm)
        metrics["train/grad_norm"] = grad_norm
        if math.isfinite(grad_norm):
            optimizer.step()
            stepped = True
    optimizer.zero_grad(set_to_none=True)
    if measure_effect and stepped:
        metrics.update(
            update_effect(as_scorer(model), batch, before, loss_mask, micro_batch_size, temperature, dp_size)
        )
    metrics["train/stepped"] = float(stepped)
    metrics["train/step_s"] = time.perf_counter() - start
    return metrics
