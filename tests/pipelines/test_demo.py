"""`drkernel demo`'s own parts: its config (cached SFT keyed by what shapes it) and its summary + plots."""

from __future__ import annotations

import argparse
import json

import pytest

from drkernel.config.base import load_config
from drkernel.config.train import TrainConfig
from drkernel.sft.warm_start import shaping_digest
from pipelines.cli import UsageError
from pipelines.demo import DEMO_CONFIG, MODEL_NOTE, WALL_NOTE, cpu_note, demo_config, write_summary


def _args(tmp_path, **kw) -> argparse.Namespace:
    base = {
        "steps": None,
        "out": str(tmp_path / "demo"),
        "config": None,
        "sft_cache": str(tmp_path / "cache"),
        "no_sft": False,
        "verbose": False,
        "overrides": [],
    }
    return argparse.Namespace(**(base | kw))


def test_demo_config_caches_sft_by_its_shaping_settings(tmp_path):
    cfg = demo_config(_args(tmp_path, steps=3))
    assert cfg.trainer.total_steps == 3 and cfg.sft.max_steps == 400 and not cfg.sft.eval.enabled
    assert cfg.data.categories == ["elementwise"]  # SFT and the RL prompt pool: the tasks a short warm start learns
    assert cfg.trainer.output_dir == str(tmp_path / "demo" / "train")
    assert cfg.sft.output_dir == str(tmp_path / "cache" / shaping_digest(cfg))
    # a training job on the demo's recipe finds the demo's checkpoint: same settings, same cache folder
    job = load_config(TrainConfig, DEMO_CONFIG, ["trainer.total_steps=2"])
    assert shaping_digest(job) == shaping_digest(cfg)
    assert not cfg.logging.verbose and demo_config(_args(tmp_path, verbose=True)).logging.verbose
    wider = demo_config(_args(tmp_path, overrides=["model.hidden_size=128"]))
    assert wider.sft.output_dir != cfg.sft.output_dir  # another model shape is another cached checkpoint
    same = demo_config(_args(tmp_path, overrides=["rollout.max_turns=1"]))
    assert same.sft.output_dir == cfg.sft.output_dir  # RL settings do not invalidate the warm start
    assert cfg.verifier.options.timing == "cpu_model" and cpu_note(cfg) == MODEL_NOTE.format(profile="h200")
    walled = demo_config(_args(tmp_path, overrides=["verifier.options.timing=measured"]))
    assert cpu_note(walled) == WALL_NOTE  # the summary names the timing the run really used
    with pytest.raises(UsageError, match="--steps"):
        demo_config(_args(tmp_path, steps=0))
    with pytest.raises(UsageError, match="queue.bogus"):
        demo_config(_args(tmp_path, overrides=["queue.bogus=1"]))
    with pytest.raises(UsageError, match="data.categories.0"):
        demo_config(_args(tmp_path, overrides=["data.categories=[elementwize]"]))
    with pytest.raises(UsageError, match="rl_data.prompt_file is its own pool"):
        demo_config(_args(tmp_path, overrides=["rl_data.prompt_file=p.parquet"]))
    with pytest.raises(UsageError, match="an sft_file has neither"):
        demo_config(_args(tmp_path, overrides=["data.sft_file=s.parquet"]))


def test_summary_and_plots_from_the_run_metrics(tmp_path):
    out = tmp_path / "demo"
    (out / "train").mkdir(parents=True)
    rows = [{"step": s, "rollout/reward_mean": 0.1 * s, "throughput/step_tokens_per_s": 90.0} for s in (1, 2)]
    (out / "train" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {
        "steps": 2,
        "policy_versions": 2,
        "reward_mean_per_step": [0.1, 0.2],
        "correct_rate_per_step": [0.2, 0.2],
        "fast1_per_step": [0.0, 0.0],
        "speedup_correct_median_per_step": [0.8, None],
        "max_staleness_observed": 1,
        "trajectories": 32,
        "verifier_calls": 20,
        "tokens_per_s_per_step": [90.0, 110.0],
        "tokens_per_s_rl_loop": 100.0,
        "tokens_per_s_end_to_end": 20.0,
        "wall_s": 60.0,
        "sft_wall_s": 0.0,
        "commit": "abc",
        "config_digest": "0123456789abcdef",
        "output_dir": str(out / "train"),
        "trained_group_ids": ["a", "b"],
    }
    cfg = demo_config(_args(tmp_path))
    result = write_summary(summary, out, cfg)
    saved = json.loads((out / "summary.json").read_text())
    assert saved == result and saved["note"] == cpu_note(cfg) and "trained_group_ids" not in saved
    assert saved["tokens_per_s_end_to_end"] == 20.0 and saved["sft_wall_s"] == 0.0 and saved["commit"] == "abc"
    plots = ["reward.png", "rates.png", "turns.png", "speedup.png", "validation.png", "staleness.png", "throughput.png"]
    assert saved["plots"] == plots
    for name in saved["plots"]:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
