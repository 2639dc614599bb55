"""One training step of a random-init Qwen3-8B shape cut to a few layers: measured peak device memory against
the dry run's estimate (drkernel/train/memory_estimate.py) for the same config, side by side.

    python benchmarks/h200_8b_step.py --config configs/h200_qwen3_8b.yaml --layers 4 [--device cuda]

The config's trainer settings are used as they are (dtype, micro_batch_size, gradient checkpointing, AdamW),
with one rank (no FSDP: trainer.num_workers=1) and hardware.model.num_layers cut to --layers; one micro-batch of
micro_batch_size x max_context_tokens tokens is scored by the trainer's own ResponseScorer (log-probs of
max_new_tokens response tokens), a policy-gradient-shaped loss is back-propagated and AdamW steps once. Prints
one JSON line: estimate and measured peak in GiB per part, and their ratio. Needs a GPU (or NPU with torch_npu);
`--device cpu` runs a smaller check of the script itself (no peak memory there).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from drkernel.config.base import load_config
from drkernel.config.train import TrainConfig
from drkernel.rl.update import ResponseScorer
from drkernel.train.memory_estimate import GIB, estimate_memory, hf_config_fields


def _accelerator(device: str) -> object:
    if device == "npu":
        import torch_npu  # noqa: F401  (registers torch.npu)

        return torch.npu
    return torch.cuda


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
    dtype = getattr(torch, tc.dtype)
    device = torch.device(args.device)
    acc = None if args.device == "cpu" else _accelerator(args.device)

    torch.manual_seed(0)
    hf = Qwen3Config(**hf_config_fields(shape), max_position_embeddings=rc.max_context_tokens, use_cache=False)
    with torch.device(device):
        model = Qwen3ForCausalLM(hf).to(dtype)
    if tc.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    scorer = ResponseScorer(model).train()
    optimizer = torch.optim.AdamW(scorer.parameters(), lr=tc.lr, betas=tc.betas, weight_decay=tc.weight_decay)

    rows, length = tc.micro_batch_size, rc.max_context_tokens
    ids = torch.randint(0, shape.vocab_size, (rows, length), device=device)
    mask = torch.ones_like(ids)
    targets = torch.zeros_like(ids)
    targets[:, length - rc.max_new_tokens :] = 1  # the response: the last max_new_tokens positions
    if acc is not None:
        acc.synchronize()
        acc.reset_peak_memory_stats()
    start = time.perf_counter()
    logp, _ = scorer(ids, mask, targets)
    loss = -(logp * targets).sum() / targets.sum()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(scorer.parameters(), tc.max_grad_norm)
    optimizer.step()
    if acc is not None:
        acc.synchronize()
    step_s = time.perf_counter() - start
    peak = acc.max_memory_allocated() if acc is not None else None
    print(
        json.dumps(
            {
                "config": args.config,
                "layers": args.layers,
                "device": args.device,
                "tokens": rows * length,
                "response_tokens": rows * rc.max_new_tokens,
                "parameters_b": round(estimate.parameters / 1e9, 4),
                "estimate_gib": {k: round(v / GIB, 3) for k, v in trainer.parts.items()},
                "estimate_total_gib": round(trainer.total / GIB, 3),
                "peak_allocated_gib": None if peak is None else round(peak / GIB, 3),
                "peak_over_estimate": None if peak is None else round(peak / trainer.total, 3),
                "step_s": round(step_s, 2),
                "loss": loss.item(),
            }
        )
    )


if __name__ == "__main__":
    main()
