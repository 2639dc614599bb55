"""Every file under configs/ loads with the schema it belongs to; a new file must be given one here.

The Serve config file is checked twice: as a Ray Serve deploy config (what `serve run` reads) and each
application's `args` as the settings its `build_app` validates.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml
from ray.serve.schema import ServeDeploySchema

from drkernel.config import load_config
from drkernel.config.algorithm import AlgorithmConfig
from drkernel.config.serve import VerifierServeConfig
from drkernel.config.train import TrainConfig

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SCHEMAS = {
    "algorithm_recipe.yaml": AlgorithmConfig,
    "demo.yaml": TrainConfig,
    "demo_cpu.yaml": TrainConfig,
    "demo_cpu_sync.yaml": TrainConfig,
}
SERVE_FILES = {"serve_verifier.yaml"}
APP_SETTINGS = {"serve_apps.verifier_app:build_app": VerifierServeConfig}


def test_every_shipped_file_has_a_schema():
    assert {p.name for p in CONFIGS.glob("*.yaml")} == set(SCHEMAS) | SERVE_FILES


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_config_file_loads(name):
    cfg = load_config(SCHEMAS[name], CONFIGS / name)
    assert isinstance(cfg, SCHEMAS[name])


@pytest.mark.parametrize("name", sorted(SERVE_FILES))
def test_serve_config_file(name):
    deploy = ServeDeploySchema.model_validate(yaml.safe_load((CONFIGS / name).read_text()))
    assert deploy.applications
    for app in deploy.applications:
        module, _, attr = app.import_path.partition(":")
        assert callable(getattr(importlib.import_module(module), attr))
        APP_SETTINGS[app.import_path].model_validate(app.args)


def test_layered_variant_differs_from_its_base_only_where_it_says():
    base = load_config(TrainConfig, CONFIGS / "demo_cpu.yaml").model_dump()
    sync = load_config(TrainConfig, CONFIGS / "demo_cpu_sync.yaml").model_dump()
    assert sync["queue"] == {**base["queue"], "max_staleness": 0}
    assert {k: v for k, v in sync.items() if k != "queue"} == {k: v for k, v in base.items() if k != "queue"}
