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
    "qwen3_8b_recipe.yaml": TrainConfig,
    "ascend_qwen3_8b.yaml": TrainConfig,
    "h200_qwen3_8b.yaml": TrainConfig,
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


@pytest.mark.parametrize("name", ["ascend_qwen3_8b.yaml", "h200_qwen3_8b.yaml"])
def test_paper_scale_configs_carry_the_papers_hyperparameters(name):
    cfg = load_config(TrainConfig, CONFIGS / name)
    assert cfg.algorithm == load_config(AlgorithmConfig, CONFIGS / "algorithm_recipe.yaml")  # every RL knob
    a = cfg.algorithm
    assert (a.loss.clip_ratio_low, a.loss.clip_ratio_high, a.loss.clip_ratio_c) == (0.2, 0.28, 3.0)
    assert (a.mrs.mode, a.mrs.lower, a.mrs.upper, a.mrs.veto_threshold) == ("geometric", 0.999, 1.001, 1e-4)
    assert (a.prs.threshold, a.prs.factor) == (0.3, 0.1)
    assert (a.reward.correct_weight, a.reward.speedup_weight, a.reward.speedup_cap, a.reward.coverage_weight) == (
        0.5,
        0.5,
        3.0,
        0.5,
    )
    assert (cfg.queue.groups_per_step, cfg.rollout.samples_per_prompt, cfg.rollout.max_turns) == (16, 16, 3)
    t = cfg.trainer
    assert (t.lr, t.weight_decay, t.max_grad_norm, t.warmup_steps) == (1e-6, 0.01, 1.0, 0)
    assert (cfg.rollout.max_new_tokens, cfg.rollout.max_context_tokens, cfg.rollout.temperature) == (8192, 18432, 1.0)
    assert cfg.hardware.model is not None and cfg.hardware.devices is not None


def test_device_variants_differ_from_the_shared_recipe_only_in_placement():
    base = load_config(TrainConfig, CONFIGS / "qwen3_8b_recipe.yaml").model_dump()
    placement = {"hardware", "policy", "trainer", "verifier"}
    for name, device in (("ascend_qwen3_8b.yaml", "npu"), ("h200_qwen3_8b.yaml", "cuda")):
        cfg = load_config(TrainConfig, CONFIGS / name)
        assert (cfg.policy.device, cfg.trainer.device, cfg.verifier.device) == (device,) * 3
        assert cfg.policy.engine == {"npu": "vllm_ascend", "cuda": "vllm"}[device]
        variant = cfg.model_dump()
        assert {k: v for k, v in variant.items() if k not in placement} == {
            k: v for k, v in base.items() if k not in placement
        }
