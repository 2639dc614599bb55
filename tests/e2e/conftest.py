"""The tiny recipe (drkernel.config.tiny_recipe) with its SFT checkpoint, trained once per test session."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from drkernel.config.base import load_config
from drkernel.config.tiny_recipe import TINY_TASKS, tiny_recipe_overrides
from drkernel.config.train import TrainConfig
from drkernel.tasks import library_path


@pytest.fixture(scope="session")
def tiny_recipe(tmp_path_factory) -> tuple[Path, list[str]]:
    """(folder, overrides): the SFT checkpoint is trained once per test session and shared."""
    root = tmp_path_factory.mktemp("recipe")
    for name in TINY_TASKS:
        shutil.copytree(library_path() / name, root / "tasks" / name)
    overrides = tiny_recipe_overrides(root)
    from drkernel.sft.stage import run_sft_stage

    run_sft_stage(load_config(TrainConfig, None, overrides), log=lambda _: None)
    return root, overrides
