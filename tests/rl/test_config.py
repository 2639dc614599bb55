"""AlgorithmConfig: recipe defaults, strictness, overrides."""

from pathlib import Path

import pytest

from drkernel.config.algorithm import AlgorithmConfig, MRSConfig
from drkernel.config.base import ConfigError, load_config


def test_defaults_are_the_recipe():
    c = AlgorithmConfig()
    assert (c.trloo.estimator, c.trloo.gamma) == ("trloo", 1.0)
    assert (c.mrs.mode, c.mrs.lower, c.mrs.upper, c.mrs.veto_threshold, c.mrs.tis_mode) == (
        "geometric",
        0.999,
        1.001,
        1e-4,
        None,
    )
    assert (c.prs.enabled, c.prs.mode, c.prs.threshold, c.prs.factor) == (True, "turn", 0.3, 0.1)
    assert (c.filter.enabled, c.filter.min_std, c.filter.max_skip_steps) == (True, 1e-3, 5)
    assert (c.loss.clip_ratio_low, c.loss.clip_ratio_high, c.loss.clip_ratio_c) == (0.2, 0.28, 3.0)
    assert (c.loss.loss_agg_mode, c.loss.loss_scale_factor, c.loss.kl_coef) == ("seq-mean-token-sum-norm", 1000, 0.0)
    assert (c.reward.speedup_cap, c.reward.coverage_weight) == (3.0, 0.5)


def test_every_field_is_documented():
    def walk(model):
        for name, field in type(model).model_fields.items():
            assert field.description, f"{type(model).__name__}.{name} lacks a description"
            sub = getattr(model, name)
            if hasattr(type(sub), "model_fields"):
                walk(sub)

    walk(AlgorithmConfig())


def test_overrides_and_rejections(tmp_path):
    path = tmp_path / "algo.yaml"
    path.write_text("trloo:\n  estimator: grpo_mean\nmrs:\n  mode: token\n")
    c = load_config(AlgorithmConfig, path, ["prs.enabled=false", "filter.max_skip_steps=0"])
    assert (c.trloo.estimator, c.mrs.mode, c.prs.enabled, c.filter.max_skip_steps) == ("grpo_mean", "token", False, 0)
    for bad in (["trloo.adv_by_last_turn=false"], ["mrs.mode=seq"], ["loss.clip_ratio_c=1.0"], ["trloo.gamma=2"]):
        with pytest.raises(ConfigError):
            load_config(AlgorithmConfig, overrides=bad)
    with pytest.raises(ValueError, match="exceeds"):
        MRSConfig(lower=1.01, upper=1.001)


def test_shipped_recipe_yaml_is_the_default_config():
    """configs/algorithm_recipe.yaml spells out the defaults: editing one without the other fails here."""
    path = Path(__file__).resolve().parents[2] / "configs" / "algorithm_recipe.yaml"
    assert load_config(AlgorithmConfig, path) == AlgorithmConfig()
