"""Checkpoint round trip on the tiny model, and refusal of a config that changes what is trained."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from transformers import AutoModelForCausalLM, AutoTokenizer

from drkernel.config.sft import TinyModelConfig
from drkernel.config.train import TrainConfig
from drkernel.model.tiny import build_tiny_model
from drkernel.model.tokenizer import build_tokenizer
from drkernel.model.weights import state_checksum
from drkernel.train.checkpoint import (
    IncompatibleCheckpoint,
    check_compatible,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)

SMALL = TinyModelConfig(hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=32, intermediate_size=128)


def _train_state(model, optimizer):
    return {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, optimizer)}


def _trained(tokenizer):
    model = build_tiny_model(SMALL, tokenizer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.tensor([[5, 6, 7, 8]])
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    return model, optimizer


def test_round_trip_restores_weights_optimizer_rng_and_extra(tmp_path):
    tokenizer = build_tokenizer(["def relu(x): return x", "import triton"] * 4, vocab_size=300)
    model, optimizer = _trained(tokenizer)
    config = TrainConfig().model_dump(mode="json")
    extra = {"step": 3, "version": 2, "cursor": {"epoch": 0, "position": 12}, "queue": {"accepted": 5}}
    torch.manual_seed(11)
    np.random.seed(11)
    random.seed(11)
    path = save_checkpoint(
        tmp_path,
        3,
        model=model,
        tokenizer=tokenizer,
        train_state=_train_state(model, optimizer),
        config=config,
        extra=extra,
    )
    expected = (torch.rand(3), np.random.rand(3), random.random())
    assert latest_checkpoint(tmp_path) == path and not list(tmp_path.glob(".*tmp"))

    ckpt = load_checkpoint(tmp_path, TrainConfig().model_dump(mode="json"))
    assert ckpt.step == 3 and ckpt.extra == extra
    assert ckpt.meta["config"] == config and "torch" in ckpt.meta["packages"]
    assert ckpt.meta["git_commit"] is None or len(ckpt.meta["git_commit"]) == 40
    restored = AutoModelForCausalLM.from_pretrained(ckpt.model_dir)
    assert state_checksum(restored.state_dict()) == state_checksum(model.state_dict())
    assert AutoTokenizer.from_pretrained(ckpt.model_dir).encode("import triton") == tokenizer.encode("import triton")
    fresh = build_tiny_model(SMALL.model_copy(update={"seed": 5}), tokenizer)
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=5.0)
    state = _train_state(fresh, fresh_opt)
    ckpt.load_train_state(state)
    set_model_state_dict(fresh, state["model"])
    set_optimizer_state_dict(fresh, fresh_opt, state["optim"])
    assert state_checksum(fresh.state_dict()) == state_checksum(model.state_dict())
    assert fresh_opt.param_groups[0]["lr"] == 1e-3
    a, b = optimizer.state_dict()["state"], fresh_opt.state_dict()["state"]
    assert all(torch.equal(a[k]["exp_avg_sq"], b[k]["exp_avg_sq"]) for k in a)
    ckpt.restore_rng()
    assert torch.equal(torch.rand(3), expected[0]) and np.array_equal(np.random.rand(3), expected[1])
    assert random.random() == expected[2]


def test_incompatible_config_is_refused_naming_each_key(tmp_path):
    saved = TrainConfig().model_dump(mode="json")
    grown = TrainConfig.model_validate(
        {
            "trainer": {"total_steps": 60, "micro_batch_size": 2},
            "logging": {"wandb": True},
            "rollout": {"num_workers": 3},
        }
    )
    check_compatible(saved, grown.model_dump(mode="json"), step=10)  # resources, logging, a longer run: fine
    older = {**saved, "trainer": {k: v for k, v in saved["trainer"].items() if not k.startswith("schedule_")}}
    check_compatible(older, saved, step=10)  # a checkpoint from before the scheduling watch resumes
    changed = TrainConfig.model_validate(
        {"model": {"hidden_size": 128}, "algorithm": {"loss": {"clip_ratio_c": 5.0}}, "trainer": {"lr": 1e-4}}
    )
    with pytest.raises(IncompatibleCheckpoint) as err:
        check_compatible(saved, changed.model_dump(mode="json"), step=10)
    for key in ("model.hidden_size", "algorithm.loss.clip_ratio_c", "trainer.lr"):
        assert key in str(err.value)
    shrunk = TrainConfig.model_validate({"trainer": {"total_steps": 5}}).model_dump(mode="json")
    with pytest.raises(IncompatibleCheckpoint, match="trainer.total_steps: 5 is below the checkpoint's step 10"):
        check_compatible(saved, shrunk, step=10)


def test_load_refuses_incompatible_or_missing_and_save_refuses_unserialisable(tmp_path):
    tokenizer = build_tokenizer(["x = 1", "y = 2"] * 4, vocab_size=300)
    model, optimizer = _trained(tokenizer)
    config = TrainConfig().model_dump(mode="json")
    state = _train_state(model, optimizer)
    with pytest.raises(ValueError, match="extra checkpoint state must be JSON-able"):
        save_checkpoint(
            tmp_path,
            1,
            model=model,
            tokenizer=tokenizer,
            train_state=state,
            config=config,
            extra={"filter": torch.zeros(2)},
        )
    assert latest_checkpoint(tmp_path) is None
    path = save_checkpoint(tmp_path, 1, model=model, tokenizer=tokenizer, train_state=state, config=config, extra={})
    other = TrainConfig.model_validate({"queue": {"groups_per_step": 8}}).model_dump(mode="json")
    with pytest.raises(IncompatibleCheckpoint, match="queue.groups_per_step: checkpoint 4, now 8"):
        load_checkpoint(path, other)
    (path / "state" / ".metadata").unlink()
    with pytest.raises(FileNotFoundError, match="state/.metadata"):
        load_checkpoint(path)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_checkpoint(tmp_path / "nowhere")
    assert json.loads((path / "meta.json").read_text())["step"] == 1
