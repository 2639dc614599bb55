"""The warm-start probe's exact answer probabilities (benchmarks/warm_start_probe.py) on a small random Qwen3: they
are what the learning experiment's warm start is chosen by, so a shifted token or a missed temperature would pick
the wrong one."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from warm_start_probe import answer_logprobs


def small_model() -> Qwen3ForCausalLM:
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=64,
    )
    return Qwen3ForCausalLM(config).eval()


def test_one_token_answers_share_all_the_probability_at_any_temperature():
    model = small_model()
    for temperature in (0.5, 1.0, 2.0):
        total = sum(answer_logprobs(model, [3, 7, 1], [v], temperature).exp().item() for v in range(32))
        assert abs(total - 1.0) < 1e-5


def test_each_token_is_scored_where_it_was_generated():
    """The model's own greedy continuation becomes certain as the temperature falls, token by token; scored one
    position off, it would not."""
    model = small_model()
    prompt = [3, 7, 1, 12]
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=6, do_sample=False, pad_token_id=0)
    greedy = out[0, len(prompt) :].tolist()
    cold = answer_logprobs(model, prompt, greedy, 1e-4)
    warm = answer_logprobs(model, prompt, greedy, 1.0)
    assert cold.shape == (6,)
    assert cold.exp().min() > 0.99
    assert warm.sum() < cold.sum() - 0.1
