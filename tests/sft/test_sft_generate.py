"""Batched generation for evaluation: input order kept, left padding does not change greedy answers."""

from __future__ import annotations

from drkernel.config.sft import TinyModelConfig
from drkernel.model.tiny import build_tiny_model
from drkernel.model.tokenizer import build_tokenizer
from drkernel.sft.evaluate import generate_responses

SMALL = TinyModelConfig(hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=32, intermediate_size=128)


def test_batched_greedy_matches_one_by_one_and_sampling_is_seeded():
    tok = build_tokenizer(["def relu(x): return torch.relu(x)\n", "triton kernel block mask\n"] * 3, 400, 1)
    model = build_tiny_model(SMALL, tok)
    chats = [[{"role": "user", "content": text}] for text in ("relu", "triton kernel block mask relu relu x", "x")]
    batched = generate_responses(model, tok, chats, sample=False, max_new_tokens=12, batch_size=3)
    alone = [generate_responses(model, tok, [c], sample=False, max_new_tokens=12, batch_size=1)[0] for c in chats]
    assert batched == alone
    for text, n_tokens, finished in batched:
        assert 1 <= n_tokens <= 12 and isinstance(text, str)
        assert finished or n_tokens == 12  # generation ends at eos or at the budget, nowhere else
    a = generate_responses(model, tok, chats, sample=True, temperature=1.0, max_new_tokens=12, seed=3)
    b = generate_responses(model, tok, chats, sample=True, temperature=1.0, max_new_tokens=12, seed=3)
    assert a == b
