"""The per-device memory estimate on shapes small enough to count by hand, checked against a real HF Qwen3."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from drkernel.config import load_config
from drkernel.config.train import ModelShapeConfig, TrainConfig
from drkernel.train.memory_estimate import (
    GIB,
    estimate_memory,
    hf_config_fields,
    kv_bytes_per_token,
    layer_activation_bytes,
    lm_head_bytes,
    math_attention_bytes,
    parameter_count,
    resident_parts,
)

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
# h=8, 2 layers, 2 query heads and 1 KV head of width 4, MLP 16, vocab 32, tied LM head
SMALL = ModelShapeConfig(
    hidden_size=8,
    num_layers=2,
    num_heads=2,
    num_kv_heads=1,
    head_dim=4,
    intermediate_size=16,
    vocab_size=32,
    tie_word_embeddings=True,
)
QWEN3_8B = ModelShapeConfig(
    hidden_size=4096,
    num_layers=36,
    num_heads=32,
    num_kv_heads=8,
    head_dim=128,
    intermediate_size=12288,
    vocab_size=151936,
)


def test_counts_by_hand():
    # layer: q 8*8 + k,v 2*8*4 + o 8*8 + q/k norms 2*4 = 200; MLP 3*8*16 = 384; norms 2*8 = 16 -> 600
    # model: embedding 32*8 (tied) + 2 layers + final norm 8
    assert parameter_count(SMALL) == 256 + 2 * 600 + 8 == 1464
    assert kv_bytes_per_token(SMALL, 2) == 2 * 2 * 1 * 4 * 2 == 32
    # per token: 4h + 2q + 2kv + 4i = 32 + 16 + 8 + 64 = 120 elements
    assert layer_activation_bytes(SMALL, tokens=10, dtype_bytes=4) == 10 * 4 * 120
    # response hidden states and their gradient, one chunk of 3 x fp32 logits x 4, the head's gradient
    assert (
        lm_head_bytes(SMALL, response_tokens=5, chunk_tokens=3, compute_bytes=2)
        == 2 * 5 * 8 * 2 + 4 * 3 * 32 * 4 + 32 * 8 * 2
    )
    assert math_attention_bytes(SMALL, sequences=1, length=10) == 2 * 2 * 10 * 10 * 4
    assert parameter_count(QWEN3_8B) == 8_190_735_360  # Qwen3-8B's safetensors total


@pytest.mark.parametrize("tied", [True, False])
def test_parameter_count_matches_the_hf_model(tied):
    shape = SMALL.model_copy(update={"tie_word_embeddings": tied})
    model = Qwen3ForCausalLM(Qwen3Config(**hf_config_fields(shape)))
    assert parameter_count(shape) == sum(p.numel() for p in model.parameters())


def small_config(*overrides: str) -> TrainConfig:
    base = [f"hardware.model.{k}={v}" for k, v in SMALL.model_dump().items()]
    sizes = ["rollout.max_context_tokens=64", "rollout.max_new_tokens=16", "rollout.min_generation_tokens=16"]
    place = ["trainer.device=cuda", "trainer.num_workers=2", "trainer.micro_batch_size=1", "trainer.dtype=float32"]
    return load_config(TrainConfig, None, [*base, *sizes, *place, *overrides])


def test_trainer_rank_by_hand():
    trainer = estimate_memory(small_config()).roles[0]
    # 1464 params fp32 over 2 ranks: 2928 B of parameters, twice that of AdamW states, resident
    assert resident_parts(trainer) == {"parameters": 2928, "AdamW states": 5856}
    # the largest moment is a layer's backward: every layer's saved tensors (2 x 64 tokens x 4 B x 120), the one
    # in backward (30720) plus the fp32 math kernel's scores and probabilities (GQA: 2 x 2 heads x 64^2 x 4), the
    # residual gradient 64 x 8 x 4, the LM head's and one layer's gradient (32 x 8 + 600) x 4, gathered weights
    # (embedding 256 + two layers 1200) x 4
    step = {k: v for k, v in trainer.parts.items() if k not in resident_parts(trainer)}
    assert step == {
        "a layer's backward: layer inputs": 2 * 30720,
        "a layer's backward: recomputed layer": 30720 + 65536,
        "a layer's backward: residual gradient": 2048,
        "a layer's backward: LM head gradient": 3424,
        "a layer's backward: gathered weights (FSDP2)": 5824,
    }
    assert trainer.total == 8784 + 168992
    assert any("math SDPA kernel" in n for n in trainer.notes)
    # end of backward: sharded gradients, the root's gradient, gathered weights; AdamW: gradients and temporaries
    assert "step moment end of backward: 0.00 GiB" in trainer.notes and len(trainer.notes) == 4

    bf16 = estimate_memory(small_config("trainer.compute_dtype=bfloat16")).roles[0]
    assert not any("math SDPA" in n for n in bf16.notes)  # fused kernels: no S x S
    assert bf16.role == "trainer rank (x2, float32 master, bfloat16 compute)"
    assert bf16.parts["a layer's backward: recomputed layer"] == 64 * 2 * 120
    checkpointed = estimate_memory(small_config("trainer.gradient_checkpointing=true")).roles[0]
    # layer inputs kept (2 x 64 x 8 x 4); the layer in backward recomputed, its gradients as large again
    assert checkpointed.parts["a layer's backward: layer inputs"] == 4096
    assert checkpointed.parts["a layer's backward: recomputed layer"] == 2 * 30720 + 65536
    one_rank = estimate_memory(small_config("trainer.num_workers=1")).roles[0]
    assert one_rank.parts["parameters"] == 1464 * 4 and not any("gathered" in k for k in one_rank.parts)
    mixed_one_rank = estimate_memory(small_config("trainer.num_workers=1", "trainer.compute_dtype=bfloat16")).roles[0]
    assert any("gathered" in k for k in mixed_one_rank.parts)  # FSDP2 over a one-rank mesh
    offload = estimate_memory(small_config("trainer.offload_optimizer=true")).roles[0]
    assert resident_parts(offload) == {"parameters": 0, "AdamW states": 0}
    assert any(n.startswith("offloaded to the host") for n in offload.notes)


def test_vllm_policy_kv_cache_is_what_the_memory_share_leaves():
    mem = 1 << 20
    cfg = small_config(
        "policy.engine=vllm",
        "policy.device=cuda",
        "policy.dtype=bfloat16",
        "policy.vllm.gpu_memory_utilization=0.5",
        f"hardware.device_memory_gib={mem / GIB}",
    )
    policy = estimate_memory(cfg).roles[1]
    assert policy.parts == {"weights": 1464 * 2, "KV cache": mem // 2 - 1464 * 2}
    assert policy.budget == mem
    assert f"holds {(mem // 2 - 2928) // (64 * 32)} sequences of 64 tokens" in policy.notes[0]


def test_the_paper_scale_configs_fit_and_what_does_not_is_named():
    for name in ("ascend_qwen3_8b.yaml", "h200_qwen3_8b.yaml"):
        estimate = estimate_memory(load_config(TrainConfig, CONFIGS / name))
        assert estimate.problems() == [], name
        assert estimate.parameters == 8_190_735_360
    one_rank = estimate_memory(load_config(TrainConfig, CONFIGS / "ascend_qwen3_8b.yaml", ["trainer.num_workers=1"]))
    (problem,) = one_rank.problems()
    # fp32 weights, gradients and two AdamW states of 8.19 B parameters alone are 122 GiB
    assert problem.startswith("trainer rank (x1, float32 master, bfloat16 compute) needs ")
    assert "more than its 64.00 GiB" in problem
    assert "AdamW states 61.03 GiB" in problem
    crowded = estimate_memory(load_config(TrainConfig, CONFIGS / "ascend_qwen3_8b.yaml", ["policy.num_replicas=8"]))
    assert crowded.problems() == [
        "the roles ask for 18 devices (trainer, policy and verifier shares), hardware.devices is 16"
    ]
    starved = estimate_memory(
        load_config(TrainConfig, CONFIGS / "ascend_qwen3_8b.yaml", ["policy.vllm.gpu_memory_utilization=0.25"])
    )
    assert any("cannot hold one 18432-token sequence" in p for p in starved.problems())


def test_cpu_roles_are_not_checked_against_accelerator_memory():
    cfg = load_config(TrainConfig, CONFIGS / "demo_cpu.yaml", ["hardware.device_memory_gib=0.000001"])
    estimate = estimate_memory(cfg)
    assert [r.budget for r in estimate.roles] == [None, None] and estimate.problems() == []
    assert estimate.parameters == sum(p.numel() for p in Qwen3ForCausalLM(Qwen3Config(**_tiny_hf(cfg))).parameters())


def _tiny_hf(cfg: TrainConfig) -> dict:
    m = cfg.model
    return {
        "hidden_size": m.hidden_size,
        "num_hidden_layers": m.num_layers,
        "num_attention_heads": m.num_heads,
        "num_key_value_heads": m.num_kv_heads,
        "head_dim": m.head_dim,
        "intermediate_size": m.intermediate_size,
        "vocab_size": cfg.tokenizer.vocab_size,
        "tie_word_embeddings": m.tie_word_embeddings,
        "torch_dtype": torch.float32,
    }
