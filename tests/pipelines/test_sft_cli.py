"""`drkernel sft`: config errors exit 2 with one line; a real short run writes an HF checkpoint."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer

from drkernel.tasks import library_path
from pipelines.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_shipped_demo_config_is_valid():
    from drkernel.config.base import load_config
    from drkernel.config.train import TrainConfig

    cfg = load_config(TrainConfig, ROOT / "configs" / "demo_cpu.yaml", ["sft.epochs=3"])
    assert cfg.sft.epochs == 3 and cfg.sft.base_model is None and cfg.model.num_layers >= 1


@pytest.mark.parametrize(
    "data, overrides, needle",
    [
        ({"sft": {"epochs": 1, "learning_rate": 1e-3}}, [], "sft.learning_rate: unknown key"),
        ({"modell": {}}, [], "modell: unknown key"),
        ({}, ["sft.eval.temprature=0.5"], "sft.eval.temprature: unknown key"),
        ({}, ["sft.epochs=0"], "sft.epochs"),
    ],
)
def test_bad_config_exits_2_with_one_line(tmp_path, capsys, data, overrides, needle):
    code = main(["sft", "--config", str(_write(tmp_path, data)), *overrides])
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err and len(err.strip().splitlines()) == 1


def test_missing_config_file_and_missing_sft_file_exit_2(tmp_path, capsys):
    assert main(["sft", "--config", str(tmp_path / "nope.yaml")]) == 2
    assert "not found" in capsys.readouterr().err
    missing = {"data": {"sft_file": str(tmp_path / "none.parquet")}, "model": {"output_dir": str(tmp_path / "b")}}
    cfg = _write(tmp_path, missing)
    assert main(["sft", "--config", str(cfg), f"sft.output_dir={tmp_path / 'o'}"]) == 2
    assert "SFT file not found" in capsys.readouterr().err
    assert main(["sft", "--evaluate-only", str(tmp_path / "no-ckpt")]) == 2
    assert "is not a folder" in capsys.readouterr().err


@pytest.mark.integration
def test_short_real_run_writes_a_loadable_checkpoint(tmp_path):
    tasks = tmp_path / "tasks"
    for name in ("relu", "softmax_rows"):
        shutil.copytree(library_path() / name, tasks / name)
    cfg = _write(
        tmp_path,
        {
            "model": {
                "hidden_size": 64,
                "num_layers": 2,
                "num_heads": 2,
                "num_kv_heads": 1,
                "head_dim": 32,
                "intermediate_size": 128,
                "output_dir": str(tmp_path / "base"),
            },
            "tokenizer": {"vocab_size": 800},
            "data": {"tasks_dir": str(tasks)},
            "sft": {
                "epochs": 2,
                "lr": 5e-3,
                "warmup_steps": 1,
                "grad_accum_steps": 2,
                "log_every": 1,
                "output_dir": str(tmp_path / "sft"),
                "eval": {"enabled": False},
            },
        },
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "sft", "--config", str(cfg)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((tmp_path / "sft" / "summary.json").read_text())
    assert summary["examples"] == 4 and summary["steps"] == 2 * 2
    assert summary["loss_curve"][0]["step"] == 1 and summary["loss_curve"][-1]["step"] == 4
    lines = (tmp_path / "sft" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2, 3, 4]
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "sft")
    tok = AutoTokenizer.from_pretrained(tmp_path / "sft")
    base = AutoModelForCausalLM.from_pretrained(tmp_path / "base")
    assert model.config.num_hidden_layers == 2 and tok.eos_token == "<|im_end|>"
    name = "model.layers.0.mlp.up_proj.weight"
    assert not model.state_dict()[name].equal(base.state_dict()[name])  # the checkpoint is the trained one
