"""The tiny Qwen3: seeded build, HF save/load, generation that stops at <|im_end|>."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3ForCausalLM

from drkernel.config.sft import TinyModelConfig, TokenizerConfig
from drkernel.model.tiny import build_tiny_model, save_tiny_base
from drkernel.model.tokenizer import build_tokenizer

SMALL = TinyModelConfig(hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=32, intermediate_size=128)
CORPUS = ["def forward(self, x):\n    return torch.relu(x)\n", "import triton\nimport triton.language as tl\n"] * 4


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(CORPUS, vocab_size=400, min_frequency=1)


def test_same_seed_same_weights_other_seed_differs(tokenizer):
    a = build_tiny_model(SMALL, tokenizer).state_dict()
    b = build_tiny_model(SMALL, tokenizer).state_dict()
    c = build_tiny_model(SMALL.model_copy(update={"seed": 1}), tokenizer).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)


def test_shape_follows_config(tokenizer):
    model = build_tiny_model(SMALL, tokenizer)
    assert isinstance(model, Qwen3ForCausalLM)
    assert model.config.vocab_size == len(tokenizer)
    assert model.config.num_hidden_layers == 2 and model.config.num_key_value_heads == 1
    assert model.config.eos_token_id == tokenizer.eos_token_id
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight  # tied


def test_saved_base_loads_through_auto_classes(tmp_path):
    out = save_tiny_base(SMALL, TokenizerConfig(vocab_size=400, min_frequency=1), CORPUS, tmp_path / "base")
    model = AutoModelForCausalLM.from_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    assert isinstance(model, Qwen3ForCausalLM)
    reference = build_tiny_model(SMALL, tok)
    assert all(torch.equal(v, reference.state_dict()[k]) for k, v in model.state_dict().items())
    prompt = tok.apply_chat_template([{"role": "user", "content": "relu"}], add_generation_prompt=True, tokenize=False)
    ids = torch.tensor([tok.encode(prompt, add_special_tokens=False)])
    out_ids = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=False)
    assert out_ids.shape[1] <= ids.shape[1] + 6 and out_ids.shape[1] > ids.shape[1]
    assert model.generation_config.eos_token_id == tok.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")


def test_heads_must_divide():
    with pytest.raises(ValidationError, match="multiple of num_kv_heads"):
        TinyModelConfig(num_heads=4, num_kv_heads=3)


def test_a_real_models_vocabulary_over_the_project_tokenizer(tokenizer):
    """model.vocab_size gives the policy a real model's embedding rows (Qwen3's 151,936) while the project's
    tokenizer uses the first ids; fewer rows than the tokenizer has ids is refused."""
    cfg = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=16, intermediate_size=64)
    wide = build_tiny_model(cfg.model_copy(update={"vocab_size": len(tokenizer) + 100}), tokenizer)
    assert wide.get_input_embeddings().weight.shape[0] == len(tokenizer) + 100
    assert build_tiny_model(cfg, tokenizer).get_input_embeddings().weight.shape[0] == len(tokenizer)
    with pytest.raises(ValueError, match="below the tokenizer's"):
        build_tiny_model(cfg.model_copy(update={"vocab_size": len(tokenizer) - 1}), tokenizer)
