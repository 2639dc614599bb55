"""The SFT loop: AdamW, linear warmup then cosine decay, gradient accumulation, clipping.

Plain torch on one device; the step is defined over response tokens (see loss.py), so micro-batch
size and accumulation change speed and memory, not what is optimized.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch
from transformers import PreTrainedModel

from drkernel import devices
from drkernel.config.sft import SFTConfig
from drkernel.log import progress
from drkernel.sft.data import SFTExample, collate
from drkernel.sft.loss import response_loss_sum


@dataclass
class StepLog:
    """What one optimizer step did."""

    step: int
    epoch: float
    loss: float
    lr: float
    grad_norm: float
    tokens: int
    elapsed_s: float

    def as_dict(self) -> dict:
        return asdict(self)


def torch_device(name: str) -> torch.device:
    """`auto` picks cuda, then npu (torch_npu), then cpu; an explicit name must be available.

    The choice is drkernel.devices', the one the verifier makes too, so every stage picks devices alike."""
    return torch.device(devices.resolve_device(name, devices.probe_availability()))


def lr_factor(step: int, total_steps: int, warmup_steps: int, min_lr_ratio: float) -> float:
    """Multiplier of the peak lr at optimizer step `step` (0-based): linear warmup, then cosine."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    span = max(total_steps - warmup_steps, 1)
    progress = min((step - warmup_steps) / span, 1.0)
    return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def plan_batches(n: int, cfg: SFTConfig) -> list[list[list[int]]]:
    """Example indices of every optimizer step: steps -> micro-batches -> indices, shuffled per epoch."""
    rng = random.Random(cfg.seed)
    per_step = cfg.micro_batch_size * cfg.grad_accum_steps
    steps = []
    for _ in range(cfg.epochs):
        order = list(range(n))
        rng.shuffle(order)
        for start in range(0, n, per_step):
            chunk = order[start : start + per_step]
            steps.append([chunk[i : i + cfg.micro_batch_size] for i in range(0, len(chunk), cfg.micro_batch_size)])
    return steps[: cfg.max_steps] if cfg.max_steps else steps


def train_sft(
    model: PreTrainedModel,
    examples: Sequence[SFTExample],
    cfg: SFTConfig,
    pad_id: int,
    log: Callable[[StepLog], None] | None = None,
) -> list[StepLog]:
    """Fine-tune `model` in place on `examples`; returns one StepLog per optimizer step."""
    if not examples:
        raise ValueError("no SFT examples to train on")
    device = next(model.parameters()).device
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    model.config.use_cache = False
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)
    steps = plan_batches(len(examples), cfg)
    steps_per_epoch = math.ceil(len(examples) / (cfg.micro_batch_size * cfg.grad_accum_steps))
    history: list[StepLog] = []
    start = time.monotonic()
    for step, micro_batches in enumerate(progress(steps, desc="sft steps")):
        for group in optimizer.param_groups:
            group["lr"] = cfg.lr * lr_factor(step, len(steps), cfg.warmup_steps, cfg.min_lr_ratio)
        total_tokens = sum(examples[i].num_response_tokens for mb in micro_batches for i in mb)
        step_loss = 0.0
        for mb in micro_batches:
            batch = {k: v.to(device) for k, v in collate([examples[i] for i in mb], pad_id).items()}
            loss_sum, _ = response_loss_sum(model, batch)
            (loss_sum / max(total_tokens, 1)).backward()
            step_loss += float(loss_sum.detach())
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        entry = StepLog(
            step=step + 1,
            epoch=(step + 1) / steps_per_epoch,
            loss=step_loss / max(total_tokens, 1),
            lr=optimizer.param_groups[0]["lr"],
            grad_norm=grad_norm,
            tokens=total_tokens,
            elapsed_s=time.monotonic() - start,
        )
        history.append(entry)
        if log is not None:
            log(entry)
    model.eval()
    model.config.use_cache = True
    return history
