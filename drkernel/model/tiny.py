"""The tiny Qwen3 policy: built from a seed, saved in Hugging Face format next to its tokenizer.

It uses the stock `Qwen3ForCausalLM`, so everything downstream (transformers generate, vLLM,
weight sync by parameter name) treats it exactly like a real Qwen3 checkpoint, only smaller.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase, Qwen3Config, Qwen3ForCausalLM

from drkernel.config.sft import TinyModelConfig, TokenizerConfig
from drkernel.model.tokenizer import build_tokenizer


def tiny_qwen3_config(cfg: TinyModelConfig, tokenizer: PreTrainedTokenizerBase) -> Qwen3Config:
    """The Qwen3Config of the tiny model; special ids come from `tokenizer`, and the vocabulary too unless
    `cfg.vocab_size` asks for more rows (a real model's shape: ids the tokenizer never emits)."""
    if cfg.vocab_size is not None and cfg.vocab_size < len(tokenizer):
        raise ValueError(f"model.vocab_size {cfg.vocab_size} is below the tokenizer's {len(tokenizer)} ids")
    return Qwen3Config(
        vocab_size=cfg.vocab_size or len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim,
        max_position_embeddings=cfg.max_position_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta},
        tie_word_embeddings=cfg.tie_word_embeddings,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        torch_dtype="float32",
    )


def build_tiny_model(cfg: TinyModelConfig, tokenizer: PreTrainedTokenizerBase) -> Qwen3ForCausalLM:
    """A freshly initialized tiny Qwen3; the same seed gives the same weights."""
    torch.manual_seed(cfg.seed)
    model = Qwen3ForCausalLM(tiny_qwen3_config(cfg, tokenizer))
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def save_tiny_base(
    model_cfg: TinyModelConfig, tok_cfg: TokenizerConfig, corpus: Iterable[str], out_dir: str | Path
) -> Path:
    """Train the tokenizer on `corpus`, build the model, save both to `out_dir`, return it."""
    out = Path(out_dir)
    tokenizer = build_tokenizer(corpus, vocab_size=tok_cfg.vocab_size, min_frequency=tok_cfg.min_frequency)
    model = build_tiny_model(model_cfg, tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
