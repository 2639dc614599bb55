"""Typed configuration: pydantic models, YAML files and `key.sub=value` overrides."""

from drkernel.config.base import ConfigError, StrictModel, apply_overrides, load_config

__all__ = ["ConfigError", "StrictModel", "apply_overrides", "load_config"]
