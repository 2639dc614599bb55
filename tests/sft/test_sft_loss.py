"""The response-only loss agrees with transformers' own causal-LM loss and ignores prompt tokens."""

from __future__ import annotations

import torch

from drkernel.config.sft import TinyModelConfig
from drkernel.model.tiny import build_tiny_model
from drkernel.model.tokenizer import build_tokenizer
from drkernel.sft.data import ChatPair, collate, encode_pair
from drkernel.sft.loss import response_loss_sum

SMALL = TinyModelConfig(hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=32, intermediate_size=128)


def _setup():
    tok = build_tokenizer(["relu torch triton kernel x = y + 1\n"] * 3, vocab_size=300, min_frequency=1)
    model = build_tiny_model(SMALL, tok)
    examples = [
        encode_pair(tok, ChatPair([{"role": "user", "content": "relu"}], "x = y + 1")),
        encode_pair(tok, ChatPair([{"role": "user", "content": "triton kernel torch"}], "x = 1")),
    ]
    return tok, model, examples


def test_matches_transformers_loss_on_a_padded_batch():
    tok, model, examples = _setup()
    batch = collate(examples, tok.pad_token_id)
    loss_sum, n = response_loss_sum(model, batch)
    assert n == sum(e.num_response_tokens for e in examples)
    expected = model(**batch).loss  # mean over labelled shifted tokens
    torch.testing.assert_close(loss_sum / n, expected, rtol=1e-5, atol=1e-5)


def test_prompt_tokens_get_no_loss_but_condition_the_response():
    tok, model, examples = _setup()
    batch = collate(examples[:1], tok.pad_token_id)
    base, _ = response_loss_sum(model, batch)
    flipped = {k: v.clone() for k, v in batch.items()}
    prompt_len = sum(1 for t in examples[0].labels if t == -100)
    flipped["labels"][0, : prompt_len - 1] = flipped["input_ids"][0, 1:prompt_len]  # would add prompt loss
    with_prompt, n_with = response_loss_sum(model, flipped)
    assert n_with > examples[0].num_response_tokens and with_prompt > base
    changed = {k: v.clone() for k, v in batch.items()}
    changed["input_ids"][0, 1] = (changed["input_ids"][0, 1] + 5) % len(tok)
    other, _ = response_loss_sum(model, changed)
    assert not torch.isclose(other, base)  # the prompt is context, the loss depends on it
