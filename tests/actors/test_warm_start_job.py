"""The job's warm start is never a surprise: a job that must make its SFT checkpoint says what that costs before
the first SFT step, `--no-sft` refuses in one line before Ray starts, and a finished checkpoint is used as it is.

Real SFT of a tiny model for two steps (seconds); no cluster is needed for any of this.
"""

from __future__ import annotations

import json
import logging
import shutil

import pytest

from actors.job_inputs import resolve_model_path
from drkernel.config.base import load_config
from drkernel.config.train import TrainConfig
from drkernel.log import setup_logging
from drkernel.sft.warm_start import SFTRequired, with_sft_paths
from drkernel.tasks import library_path
from pipelines.cli import main

TINY = [
    "model.hidden_size=32",
    "model.num_layers=1",
    "model.num_heads=2",
    "model.num_kv_heads=1",
    "model.head_dim=16",
    "model.intermediate_size=64",
    "model.max_position_embeddings=2048",
    "tokenizer.vocab_size=400",
    "data.max_length=2048",
    "sft.max_steps=2",
    "sft.warmup_steps=1",
    "sft.num_threads=1",
    "sft.eval.enabled=false",
]


@pytest.fixture(autouse=True)
def _seen_by_caplog(caplog):
    """The project's root logger does not propagate once set up (drkernel.log): hand caplog its records."""
    root = logging.getLogger("drkernel")
    root.addHandler(caplog.handler)
    yield
    root.removeHandler(caplog.handler)


@pytest.fixture
def tiny(tmp_path, monkeypatch) -> list[str]:
    monkeypatch.setenv("DRKERNEL_SFT_CACHE", str(tmp_path / "cache"))
    shutil.copytree(library_path() / "relu", tmp_path / "tasks" / "relu")
    yield [*TINY, f"data.tasks_dir={tmp_path / 'tasks'}", f"trainer.output_dir={tmp_path / 'run'}"]
    setup_logging(json_lines=False)


def test_the_job_announces_the_sft_before_it_starts_then_reuses_the_checkpoint(tiny, tmp_path, caplog):
    cfg = with_sft_paths(load_config(TrainConfig, None, tiny))
    assert cfg.sft.output_dir.startswith(str(tmp_path / "cache"))  # the machine-wide cache, not Ray's copy of cwd
    with caplog.at_level("INFO", logger="drkernel"):
        path, sft_s = resolve_model_path(cfg)
    messages = [r.getMessage() for r in caplog.records]
    announce = next(i for i, m in enumerate(messages) if "SFT warm start: 2 optimizer steps" in m)
    first_step = next(i for i, m in enumerate(messages) if m.startswith("step 1 "))
    assert announce < first_step and cfg.sft.output_dir in messages[announce]
    assert path == cfg.sft.output_dir and sft_s > 0
    assert json.loads((tmp_path / "cache" / path.rsplit("/", 1)[1] / "summary.json").read_text())["steps"] == 2

    caplog.clear()
    with caplog.at_level("INFO", logger="drkernel"):
        assert resolve_model_path(cfg) == (path, 0.0)  # the second job of this config trains nothing
        assert resolve_model_path(cfg, allow_sft=False) == (path, 0.0)
    assert not any("SFT warm start" in r.getMessage() for r in caplog.records)


def test_no_sft_refuses_in_one_line_before_ray_starts(tiny, tmp_path, capsys):
    cfg = with_sft_paths(load_config(TrainConfig, None, tiny))
    with pytest.raises(SFTRequired, match="2 steps"):
        resolve_model_path(cfg, allow_sft=False)
    assert main(["train", "--no-sft", *tiny]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--no-sft refuses" in err[0] and "drkernel sft" in err[0], err
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())  # nothing was made
