"""A tiny recipe for whole-job tests: a 64-wide Qwen3 overfit on two shipped tasks, so that within seconds of
SFT it writes real Triton kernels the real verifier can judge, and RL steps see correct and wrong answers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from drkernel.config.base import load_config
from drkernel.config.train import TrainConfig
from drkernel.tasks import library_path

TASKS = ("add", "relu")


def recipe_overrides(root: Path) -> list[str]:
    return [
        "model.hidden_size=64",
        "model.num_layers=2",
        "model.num_heads=2",
        "model.num_kv_heads=1",
        "model.head_dim=32",
        "model.intermediate_size=128",
        "model.max_position_embeddings=2048",
        f"model.output_dir={root / 'base'}",
        "tokenizer.vocab_size=1024",
        f"data.tasks_dir={root / 'tasks'}",
        "data.max_length=2048",
        f"sft.output_dir={root / 'sft'}",
        "sft.epochs=60",
        "sft.lr=3e-3",
        "sft.warmup_steps=5",
        "sft.grad_accum_steps=1",
        "sft.micro_batch_size=2",
        "sft.eval.enabled=false",
        "sft.log_every=100",
        "rollout.samples_per_prompt=2",
        "rollout.max_turns=2",
        "rollout.max_new_tokens=512",
        "rollout.max_context_tokens=2048",
        "rollout.groups_per_worker=2",
        "queue.groups_per_step=2",
        "trainer.total_steps=2",
        "trainer.checkpoint_every=2",
        "trainer.micro_batch_size=4",
        f"trainer.output_dir={root / 'train'}",
        "trainer.lr=1e-4",
        "verifier.options.num_correct_trials=1",
        "verifier.options.measure_performance=false",
        "verifier.options.measure_coverage=false",
        "logging.tensorboard=false",
        "logging.samples_every=1",
        "algorithm.filter.enabled=false",  # a 2-step smoke run must train even when every group ties
        "policy.cpus_per_replica=0.25",
        "verifier.cpus_per_replica=0.25",
        "trainer.cpus_per_worker=0.25",
    ]


@pytest.fixture(scope="session")
def tiny_recipe(tmp_path_factory) -> tuple[Path, list[str]]:
    """(folder, overrides): the SFT checkpoint is trained once per test session and shared."""
    root = tmp_path_factory.mktemp("recipe")
    for name in TASKS:
        shutil.copytree(library_path() / name, root / "tasks" / name)
    overrides = recipe_overrides(root)
    from drkernel.sft.stage import run_sft_stage

    run_sft_stage(load_config(TrainConfig, None, overrides), log=lambda _: None)
    return root, overrides
