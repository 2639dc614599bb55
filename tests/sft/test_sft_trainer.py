"""The SFT loop: schedule, batch plan, and a short real run whose loss goes down."""

from __future__ import annotations

import math

import pytest
import torch

from drkernel.config.sft import SFTConfig, TinyModelConfig
from drkernel.model.tiny import build_tiny_model
from drkernel.model.tokenizer import build_tokenizer
from drkernel.sft.data import corpus_texts, encode_pairs, task_pairs
from drkernel.sft.trainer import lr_factor, plan_batches, torch_device, train_sft
from drkernel.tasks import load_tasks


def test_lr_warms_up_then_decays_to_the_floor():
    factors = [lr_factor(s, 20, 5, 0.1) for s in range(20)]
    assert factors[:5] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    assert all(a >= b for a, b in zip(factors[4:], factors[5:]))
    assert factors[-1] > 0.1 and lr_factor(20, 20, 5, 0.1) == pytest.approx(0.1)
    assert lr_factor(0, 10, 0, 0.0) == pytest.approx(1.0)


def test_plan_visits_every_example_once_per_epoch():
    cfg = SFTConfig(epochs=3, micro_batch_size=2, grad_accum_steps=2, seed=7)
    steps = plan_batches(10, cfg)
    assert len(steps) == 3 * math.ceil(10 / 4)
    flat = [i for step in steps for mb in step for i in mb]
    for epoch in range(3):
        assert sorted(flat[epoch * 10 : (epoch + 1) * 10]) == list(range(10))
    assert all(len(mb) <= 2 for step in steps for mb in step)
    assert len(plan_batches(10, cfg.model_copy(update={"max_steps": 4}))) == 4


def test_unknown_device_is_refused():
    assert torch_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="not available"):
            torch_device("cuda")


def test_short_sft_run_on_shipped_tasks_lowers_the_loss():
    torch.set_num_threads(2)
    tasks = [t for t in load_tasks() if t.name in ("relu", "softmax_rows")]
    assert len(tasks) == 2
    pairs = task_pairs(tasks)
    tok = build_tokenizer(corpus_texts(pairs), vocab_size=1024)
    small = TinyModelConfig(
        hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=32, intermediate_size=128
    )
    model = build_tiny_model(small, tok)
    examples, dropped = encode_pairs(tok, pairs, max_length=2048)
    assert not dropped and len(examples) == len(pairs)
    cfg = SFTConfig(epochs=10, lr=1e-2, warmup_steps=2, micro_batch_size=2, grad_accum_steps=1, num_threads=2)
    history = train_sft(model, examples, cfg, tok.pad_token_id)
    assert len(history) == 10 * math.ceil(len(examples) / 2)
    first, last = history[0].loss, history[-1].loss
    assert math.isfinite(last) and last < 0.6 * first, (first, last)
    assert sum(h.tokens for h in history) == cfg.epochs * sum(e.num_response_tokens for e in examples)
    assert not model.training and model.config.use_cache
