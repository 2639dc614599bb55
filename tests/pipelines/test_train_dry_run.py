"""`drkernel train --dry-run`: the resolved config on stdout, the per-device memory estimate on stderr, and a
recipe that cannot fit refused (exit 2) naming the numbers, before Ray or torch start."""

from __future__ import annotations

import json
from pathlib import Path

from drkernel.config import load_config
from drkernel.config.train import TrainConfig
from pipelines.cli import main

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_dry_run_prints_config_and_estimate(capsys):
    assert main(["train", "--config", str(CONFIGS / "ascend_qwen3_8b.yaml"), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == load_config(TrainConfig, CONFIGS / "ascend_qwen3_8b.yaml").model_dump(mode="json")
    assert "8.191 B parameters; device memory 64.00 GiB; devices needed 16 of 16" in err
    assert "trainer rank (x8, float32 master, bfloat16 compute): 26.40 GiB of 64.00 GiB" in err
    assert "KV cache holds 12 sequences of 18432 tokens" in err and err.rstrip().endswith("fits")


def test_a_recipe_that_cannot_fit_is_refused_with_its_numbers(capsys):
    config = str(CONFIGS / "ascend_qwen3_8b.yaml")
    assert main(["train", "--config", config, "--dry-run", "trainer.num_workers=2"]) == 2
    err = capsys.readouterr().err
    assert (
        "the recipe does not fit: trainer rank (x2, float32 master, bfloat16 compute) needs 76.28 GiB per device, "
        "more than its 64.00 GiB" in err
    )
    assert main(["train", "--config", config, "trainer.num_workers=2"]) == 2  # the job itself refuses it too
    assert "does not fit" in capsys.readouterr().err


def test_hardware_model_must_match_the_policy_folder(tmp_path, capsys):
    recipe = load_config(TrainConfig, CONFIGS / "h200_qwen3_8b.yaml")
    shape = recipe.hardware.model
    hf = {
        "hidden_size": shape.hidden_size,
        "num_hidden_layers": shape.num_layers,
        "num_attention_heads": shape.num_heads,
        "num_key_value_heads": shape.num_kv_heads,
        "head_dim": shape.head_dim,
        "intermediate_size": shape.intermediate_size,
        "vocab_size": shape.vocab_size,
        "tie_word_embeddings": False,
        "model_type": "qwen3",
    }
    (tmp_path / "config.json").write_text(json.dumps(hf))
    args = ["train", "--config", str(CONFIGS / "h200_qwen3_8b.yaml"), "--dry-run", f"policy.model_path={tmp_path}"]
    assert main(args) == 0
    capsys.readouterr()
    (tmp_path / "config.json").write_text(json.dumps(hf | {"num_hidden_layers": 40, "intermediate_size": 17408}))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "hardware.model.num_layers is 36, the model's num_hidden_layers is 40" in err
    assert "hardware.model.intermediate_size is 12288, the model's intermediate_size is 17408" in err
