"""Training steps of a random-init Qwen3-8B shape cut to a few layers, held the way a trainer rank holds it:
measured device memory per part against the dry run's estimate (drkernel/train/memory_estimate.py) for the
same config, side by side, and the trainer's tokens/s.

    python benchmarks/h200_8b_step.py --config configs/h200_qwen3_8b.yaml --layers 4 [--device cuda]

The config's trainer settings are used as they are (master dtype, compute dtype, offload, micro_batch_size,
gradient checkpointing, LM-head chunk, AdamW), with one rank (trainer.num_workers=1; FSDP2 over a one-rank mesh
when the config asks for mixed precision or offload, as actors/trainer.py does) and hardware.model.num_layers
cut to --layers. Each step scores one micro-batch of micro_batch_size x max_context_tokens tokens with the
trainer's ResponseScorer (log-probs of the last max_new_tokens positions), back-propagates a
policy-gradient-shaped loss and steps AdamW. Step 1 creates the AdamW states; step 2 is the one measured.
Prints one JSON line: per part, estimate and measurement in GiB:
    resident   parameters + AdamW states after a step (gradients are freed by zero_grad(set_to_none=True))
    step peak  the peak during step 2 above what was resident before it (gathered weights, activations, LM head,
               gradients)
Needs a GPU (or NPU with torch_npu); `--device cpu` runs a smaller check of the script itself (no memory).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import time

import torch
import torch.distributed as dist
from transformers import Qwen3Config, Qwen3ForCausalLM

from drkernel.config.base import load_config
from drkernel.config.train import TrainConfig
from drkernel.model.attention import fused_only
from drkernel.rl.update import ResponseScorer
from drkernel.train.backend import DIST_BACKEND
from drkernel.train.memory_estimate import GIB, estimate_memory, hf_config_fields, resident_parts
from drkernel.train.sharding import compute_dtype, shard_policy


def _accelerator(device: str) -> object:
    if device == "npu":
        import torch_npu  # noqa: F401  (registers torch.npu)

        return torch.npu
    return torch.cuda


def _one_rank_group(device: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(port))
    dist.init_process_group(DIST_BACKEND[device], rank=0, world_size=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/h200_qwen3_8b.yaml")
    parser.add_argument("--layers", type=int, default=4, help="decoder layers kept of the config's model shape")
    parser.add_argument("--device", default="cuda", choices=["cuda", "npu", "cpu"])
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. rollout.max_context_tokens=4096")
    args = parser.parse_args()

    cfg = load_config(
        TrainConfig,
        args.config,
        [*args.overrides, f"hardware.model.num_layers={args.layers}", "trainer.num_workers=1"],
    )
    estimate = estimate_memory(cfg)
    trainer = estimate.roles[0]
    shape, tc, rc = cfg.hardware.model, cfg.trainer, cfg.rollout
    if shape is None:
        raise SystemExit("the config needs hardware.model (the policy's shape)")
    device = torch.device(args.device)
    acc = None if args.device == "cpu" else _accelerator(args.device)

    torch.manual_seed(0)
    hf = Qwen3Config(**hf_config_fields(shape), max_position_embeddings=rc.max_context_tokens, use_cache=False)
    hf._attn_implementation = "sdpa"
    with torch.device(device):
        model = Qwen3ForCausalLM(hf).to(getattr(torch, tc.dtype))
    if tc.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    scorer = ResponseScorer(model, tc.lm_head_chunk_tokens, fused_only(args.device, compute_dtype(tc))).train()
    fsdp = tc.fsdp_policies
    if fsdp:
        _one_rank_group(args.device)
        shard_policy(scorer, list(model.get_decoder().layers), tc, args.device, 1)
    optimizer = torch.optim.AdamW(scorer.parameters(), lr=tc.lr, betas=tc.betas, weight_decay=tc.weight_decay)

    rows, length = tc.micro_batch_size, rc.max_context_tokens
    ids = torch.randint(0, shape.vocab_size, (rows, length), device=device)
    mask = torch.ones_like(ids)
    targets = torch.zeros_like(ids)
    targets[:, length - rc.max_new_tokens :] = 1  # the response: the last max_new_tokens positions

    def step() -> float:
        start = time.perf_counter()
        logp, _ = scorer(ids, mask, targets, with_entropy=True)
        loss = -(logp * targets).sum() / targets.sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(scorer.parameters(), tc.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if acc is not None:
            acc.synchronize()
        return time.perf_counter() - start

    first_s = step()
    resident = acc.memory_allocated() if acc is not None else None
    if acc is not None:
        acc.reset_peak_memory_stats()
    step_s = step()
    peak = acc.max_memory_allocated() if acc is not None else None
    est_resident = sum(resident_parts(trainer).values())
    est_step = trainer.total - est_resident
    measured = {
        "resident_gib": None if resident is None else round(resident / GIB, 3),
        "step_peak_gib": None if peak is None else round((peak - resident) / GIB, 3),
        "peak_allocated_gib": None if peak is None else round(peak / GIB, 3),
    }
    print(
        json.dumps(
            {
                "config": args.config,
                "layers": args.layers,
                "device": args.device,
                "fsdp_one_rank": fsdp,
                "dtype": tc.dtype,
                "compute_dtype": str(compute_dtype(tc)).removeprefix("torch."),
                "tokens": rows * length,
                "response_tokens": rows * rc.max_new_tokens,
                "parameters_b": round(estimate.parameters / 1e9, 4),
                "estimate_gib": {k: round(v / GIB, 3) for k, v in trainer.parts.items()},
                "estimate_resident_gib": round(est_resident / GIB, 3),
                "estimate_step_gib": round(est_step / GIB, 3),
                "estimate_total_gib": round(trainer.total / GIB, 3),
                **measured,
                "resident_over_estimate": None if resident is None else round(resident / est_resident, 3),
                "step_over_estimate": None if peak is None else round((peak - resident) / est_step, 3),
                "peak_over_estimate": None if peak is None else round(peak / trainer.total, 3),
                "first_step_s": round(first_s, 2),
                "step_s": round(step_s, 2),
                "tokens_per_s": round(rows * length / step_s, 1),
            }
        )
    )
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
