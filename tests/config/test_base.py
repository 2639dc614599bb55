"""Config loading: YAML + `key.sub=value` overrides, unknown keys rejected at every level."""

from __future__ import annotations

import pytest
from pydantic import Field

from drkernel.config.base import ConfigError, StrictModel, apply_overrides, load_config


class Inner(StrictModel):
    lr: float = Field(1e-3, description="learning rate")
    steps: int = Field(10, description="steps")


class Outer(StrictModel):
    name: str = Field("demo", description="run name")
    inner: Inner = Field(default_factory=Inner, description="nested section")
    tags: list[str] = Field(default_factory=list, description="free tags")


def test_defaults_without_file():
    cfg = load_config(Outer)
    assert cfg.name == "demo" and cfg.inner.lr == 1e-3


def test_yaml_then_overrides_win(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: a\ninner:\n  lr: 0.5\n")
    cfg = load_config(Outer, path, ["inner.steps=7", "inner.lr=2e-2", "tags=[x, y]"])
    assert (cfg.name, cfg.inner.lr, cfg.inner.steps, cfg.tags) == ("a", 0.02, 7, ["x", "y"])


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["inner.lrr=1"], "inner.lrr: unknown key"),
        (["nope=1"], "nope: unknown key"),
        (["inner.steps=abc"], "inner.steps"),
        (["inner"], "key.sub=value"),
        (["inner..lr=1"], "key.sub=value"),
        (["name.x=1"], "name"),
    ],
)
def test_bad_overrides_name_the_key(overrides, needle):
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        load_config(Outer, None, overrides)


def test_a_misspelt_key_gets_a_suggestion_and_a_stranger_none():
    from drkernel.config.train import TrainConfig

    with pytest.raises(ConfigError, match=r"trainer\.total_step: unknown key \(did you mean trainer\.total_steps\?\)"):
        load_config(TrainConfig, None, ["trainer.total_step=2"])
    with pytest.raises(
        ConfigError, match=r"verifier\.options\.timng: unknown key \(did you mean verifier\.options\.timing\?\)"
    ):
        load_config(TrainConfig, None, ["verifier.options.timng=cpu_model"])
    with pytest.raises(ConfigError, match=r"trainr: unknown key \(did you mean trainer\?\)"):
        load_config(TrainConfig, None, ["trainr.total_steps=2"])
    with pytest.raises(ConfigError) as err:
        load_config(Outer, None, ["inner.zzz=1"])
    assert str(err.value).endswith("inner.zzz: unknown key")  # nothing close: no guess


def test_unknown_key_in_yaml(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("inner:\n  lr: 1\n  momentum: 0.9\n")
    with pytest.raises(ConfigError, match=r"inner\.momentum: unknown key"):
        load_config(Outer, path)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(Outer, tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(Outer, bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("3\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(Outer, scalar)


def test_apply_overrides_does_not_mutate_input():
    data = {"inner": {"lr": 1}}
    out = apply_overrides(data, ["inner.lr=2"])
    assert data == {"inner": {"lr": 1}} and out == {"inner": {"lr": 2}}


def test_defaults_layer_in_order_and_the_file_wins(tmp_path):
    (tmp_path / "base.yaml").write_text("name: base\ntags: [a, b]\ninner:\n  lr: 0.1\n  steps: 3\n")
    (tmp_path / "mid.yaml").write_text("defaults: [base.yaml]\ninner:\n  steps: 5\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "top.yaml").write_text("defaults:\n  - ../mid.yaml\ntags: [c]\ninner:\n  lr: 0.2\n")
    cfg = load_config(Outer, sub / "top.yaml")
    # mappings merge key by key, lists replace; paths are relative to the listing file
    assert (cfg.name, cfg.tags, cfg.inner.lr, cfg.inner.steps) == ("base", ["c"], 0.2, 5)
    assert load_config(Outer, sub / "top.yaml", ["inner.steps=9"]).inner.steps == 9  # overrides come last


def test_defaults_entry_places_a_file_under_a_section(tmp_path):
    (tmp_path / "inner.yaml").write_text("lr: 0.5\n")
    (tmp_path / "top.yaml").write_text("defaults:\n  - inner: inner.yaml\ninner:\n  steps: 2\n")
    assert load_config(Outer, tmp_path / "top.yaml").inner == Inner(lr=0.5, steps=2)


def test_defaults_errors_name_the_file(tmp_path):
    (tmp_path / "a.yaml").write_text("defaults: [b.yaml]\n")
    (tmp_path / "b.yaml").write_text("defaults: [a.yaml]\n")
    with pytest.raises(ConfigError, match="include each other"):
        load_config(Outer, tmp_path / "a.yaml")
    (tmp_path / "c.yaml").write_text("defaults: [gone.yaml]\n")
    with pytest.raises(ConfigError, match=r"gone\.yaml \(listed in .*c\.yaml\)"):
        load_config(Outer, tmp_path / "c.yaml")
    (tmp_path / "d.yaml").write_text("defaults: [{inner: x.yaml, name: y.yaml}]\n")
    with pytest.raises(ConfigError, match="file name or"):
        load_config(Outer, tmp_path / "d.yaml")
