"""Config loading shared by every entry point.

A config is a pydantic model whose fields all carry defaults and one-line docs. YAML files in
configs/ fill it; `key.sub=value` arguments on the command line override single fields. Unknown
keys are rejected at every level so a typo never silently falls back to a default.

A file may layer on others, as verl recipes do: `defaults: [base.yaml, {algorithm: recipe.yaml}]` reads
each listed file (paths relative to the listing file; a `{section: file}` entry places that file under
`section`), merges them in order, then the file's own keys; mappings merge key by key, anything else
(scalars, lists, null) replaces what came before. So a variant holds only what differs from its base.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, TypeVar, get_args

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

T = TypeVar("T", bound=BaseModel)


class ConfigError(ValueError):
    """A config file or override that cannot be turned into a valid config."""


class StrictModel(BaseModel):
    """Base for every config model: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def _parse_value(text: str) -> Any:
    """Read an override value the way YAML reads a scalar (`3`, `0.5`, `true`, `null`, `[1,2]`)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of `data` with each `a.b.c=value` override written into the nested dict."""
    out: dict[str, Any] = yaml.safe_load(yaml.safe_dump(data)) or {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key or any(not part for part in key.split(".")):
            raise ConfigError(f"override {item!r} is not of the form key.sub=value")
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {item!r}: {part!r} is a value, not a section")
            node = child
        node[leaf] = _parse_value(value)
    return out


def _section_model(cls: type[BaseModel], path: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that holds the keys at `path` under `cls` (None past a non-model field)."""
    model: type[BaseModel] = cls
    for part in path:
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        found = [t for t in (field.annotation, *get_args(field.annotation)) if isinstance(t, type)]
        nested = [t for t in found if issubclass(t, BaseModel)]
        if not nested:
            return None
        model = nested[0]
    return model


def _did_you_mean(cls: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """' (did you mean trainer.total_steps?)' for a misspelt key, else ''."""
    model = _section_model(cls, loc[:-1])
    if model is None:
        return ""
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1, cutoff=0.6)
    return f" (did you mean {'.'.join(map(str, (*loc[:-1], close[0])))}?)" if close else ""


def _format_errors(err: ValidationError, cls: type[BaseModel]) -> str:
    lines = []
    for e in err.errors():
        where = ".".join(str(p) for p in e["loc"]) or "<root>"
        msg = "unknown key" + _did_you_mean(cls, tuple(e["loc"])) if e["type"] == "extra_forbidden" else e["msg"]
        lines.append(f"{where}: {msg}")
    return "; ".join(lines)


DEFAULTS_KEY = "defaults"


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` written onto a copy of `base`: mappings merge recursively, other values replace."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def read_config_file(path: str | Path, _chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The mapping a config file describes once its `defaults` are resolved (see the module docstring)."""
    p = Path(path).resolve()
    if p in _chain:
        raise ConfigError(f"config files include each other: {' -> '.join(str(c) for c in (*_chain, p))}")
    if not p.is_file():
        where = f" (listed in {_chain[-1]})" if _chain else ""
        raise ConfigError(f"config file not found: {Path(path)}{where}")
    try:
        loaded = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {p} is not valid YAML: {e}") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"config file {p} must hold a mapping at the top level")
    own = dict(loaded or {})
    layers = own.pop(DEFAULTS_KEY, None) or []
    if not isinstance(layers, list):
        layers = [layers]
    data: dict[str, Any] = {}
    for entry in layers:
        if isinstance(entry, str):
            data = merge(data, read_config_file(p.parent / entry, (*_chain, p)))
        elif isinstance(entry, dict) and len(entry) == 1 and all(isinstance(v, str) for v in entry.values()):
            section, file = next(iter(entry.items()))
            data = merge(data, {section: read_config_file(p.parent / file, (*_chain, p))})
        else:
            raise ConfigError(
                f"{p}: each `{DEFAULTS_KEY}` entry is a file name or {{section: file name}}, not {entry!r}"
            )
    return merge(data, own)


def load_config(cls: type[T], path: str | Path | None = None, overrides: list[str] | None = None) -> T:
    """Build `cls` from an optional YAML file (with its `defaults` layers) plus overrides; raise ConfigError
    naming bad keys."""
    data = read_config_file(path) if path is not None else {}
    data = apply_overrides(data, overrides or [])
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"invalid {cls.__name__}: {_format_errors(e, cls)}") from None
