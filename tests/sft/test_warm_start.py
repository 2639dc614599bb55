"""The SFT warm start's cache folder and its announcement: where a config's checkpoint lives (the same folder for
every job, `drkernel sft` and `drkernel demo` with the same settings) and what making it would cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drkernel.config.base import load_config
from drkernel.config.train import TrainConfig
from drkernel.sft.warm_start import CACHE_ENV, cache_root, is_complete, plan_sft, shaping_digest, with_sft_paths

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _cfg(name: str | None = "demo.yaml", *overrides: str) -> TrainConfig:
    return load_config(TrainConfig, CONFIGS / name if name else None, list(overrides))


def test_the_cache_folder_is_named_by_what_shapes_the_weights(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    assert cache_root() == tmp_path / "cache"
    demo = with_sft_paths(_cfg())
    assert demo.sft.output_dir == str(tmp_path / "cache" / shaping_digest(demo))
    assert demo.model.output_dir == demo.sft.output_dir + "-base"
    # the RL run, the evaluation and the log cadence do not change the weights: same folder
    for same in ("trainer.total_steps=2", "sft.eval.enabled=true", "sft.log_every=1", "rollout.max_turns=1"):
        assert with_sft_paths(_cfg("demo.yaml", same)).sft.output_dir == demo.sft.output_dir, same
    # anything that does is another folder
    for other in ("model.hidden_size=128", "sft.max_steps=10", "data.feedback_turns=false", "tokenizer.vocab_size=999"):
        assert with_sft_paths(_cfg("demo.yaml", other)).sft.output_dir != demo.sft.output_dir, other
    # a folder the user named is kept, and so is the base model's
    mine = with_sft_paths(
        _cfg("demo.yaml", f"sft.output_dir={tmp_path / 'mine'}", f"model.output_dir={tmp_path / 'b'}")
    )
    assert (mine.sft.output_dir, mine.model.output_dir) == (str(tmp_path / "mine"), str(tmp_path / "b"))
    assert with_sft_paths(demo) == demo  # idempotent: the job and the SFT stage may both apply it


def test_a_checkpoint_counts_only_once_the_stage_finished_it(tmp_path):
    assert not is_complete(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    assert not is_complete(tmp_path)  # the model's config is written before its weights: not yet usable
    (tmp_path / "summary.json").write_text(json.dumps({"steps": 1}))
    assert is_complete(tmp_path)


def test_the_plan_counts_steps_examples_and_evaluation_before_anything_runs():
    demo = plan_sft(with_sft_paths(_cfg()))
    # 15 elementwise tasks x 2 solutions, plus one second-turn example per task holding both
    assert (demo.examples, demo.second_turn_examples, demo.steps, demo.eval_answers) == (45, 15, 400, 0)
    assert demo.device == "cpu" and demo.estimate_s is not None and 60 < demo.estimate_s < 3600
    text = demo.describe()
    assert "400 optimizer steps" in text and "45 examples" in text and demo.checkpoint in text
    # the embedded default as the user met it: every task, 25 epochs, evaluation on
    full = plan_sft(with_sft_paths(_cfg("demo_cpu.yaml")))
    assert full.steps == 25 * -(-106 // 4) == 675 and full.eval_answers == 53 * 2
    assert "106 sampled answers verified" in full.describe()
    shorter = plan_sft(with_sft_paths(_cfg("demo.yaml", "sft.max_steps=200")))
    assert shorter.steps == 200 and shorter.estimate_s == pytest.approx(demo.estimate_s / 2)
    assert plan_sft(with_sft_paths(_cfg("demo.yaml", "sft.max_steps=10000"))).steps == 60 * 12  # epochs bound it
    base = plan_sft(with_sft_paths(_cfg("demo.yaml", "sft.base_model=/some/hf/model")))
    assert base.estimate_s is None and "no time estimate" in base.describe()
