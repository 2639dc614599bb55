"""Row models of the RL prompt pool, the schema of `hkust-nlp/drkernel-rl-data`.

One row = one optimization task: the chat prompt the policy sees, and the reference PyTorch source
the verifier checks candidates against. Strictness is split on purpose:

- The fields the system consumes (`prompt`, `reward_model.ground_truth`, `extra_info.entry_point`,
  `extra_info.uuid`, ...) are typed and validated, so a broken row fails at load, not mid-rollout.
- Columns and `extra_info` keys we do not consume (the real dataset carries `original_prompt`,
  `repo_name`, `type`; the validation set carries `name`, `problem_id`) are kept as they are, so
  reading and writing a row loses nothing.

Parquet readers hand back numpy arrays for list columns, and exports store nested columns
(`prompt`, `reward_model`, `extra_info`) either as structs or as JSON strings (the recipe's engine and
our SFT path accept both); `parse_row` normalizes every form.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

DEFAULT_ABILITY = "kernel_optimization"


class RowError(ValueError):
    """A row that does not fit the schema: names the file, the row index in it, the uuid and the field.

    `index` is the row's position in its file (never a shuffled position), so a user can find it.
    """

    def __init__(
        self, index: int | None, field: str, message: str, *, file: str | None = None, uuid: str | None = None
    ):
        self.index = index
        self.field = field
        self.message = message
        self.file = file
        self.uuid = uuid
        where = f"row {index}" if index is not None else "row"
        if uuid:
            where += f" (uuid {uuid})"
        if file:
            where = f"{file}: {where}"
        super().__init__(f"{where}: {field}: {message}")


class ChatMessage(BaseModel):
    """One chat turn; extra keys (e.g. `name`) are kept for the chat template."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant", "tool"]
    content: str


class RewardModel(BaseModel):
    """What the reward needs: the reference source (KernelBench contract) and the reward style."""

    model_config = ConfigDict(extra="allow")

    ground_truth: str = Field(min_length=1, description="reference PyTorch source defining the entry point")
    style: str = Field("rule", description="reward style tag; the recipe's data uses 'rule'")


class ExtraInfo(BaseModel):
    """Rollout metadata; only `entry_point` and the uuid change behaviour, the rest is bookkeeping."""

    model_config = ConfigDict(extra="allow")

    entry_point: str = Field("Model", min_length=1, description="reference class; candidates define <name>New")
    uuid: str | None = Field(None, description="task id, keys the reference-timing cache")
    level: int | str | None = Field(None, description="difficulty level (KernelBench 1-4) when known")
    ops: list[str] = Field(default_factory=list, description="torch ops the reference uses")
    module_name: str | None = Field(None, description="name of the reference module or file")

    @field_validator("ops", mode="before")
    @classmethod
    def _ops_as_list(cls, value: Any) -> Any:
        """The real data stores ops as a list or as a string (JSON list or comma separated)."""
        if value is None:
            return []
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [part.strip() for part in text.split(",") if part.strip()]
        return value

    @field_validator("uuid", "module_name", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) else value


class TaskRow(BaseModel):
    """One prompt-pool row. Unknown top-level columns are kept (see the module docstring)."""

    model_config = ConfigDict(extra="allow")

    data_source: str = Field(min_length=1, description="origin tag, e.g. 'cuda_llm' or 'kernelbench'")
    prompt: list[ChatMessage] = Field(min_length=1, description="chat messages; the last is the user's task")
    ability: str = Field(DEFAULT_ABILITY, description="task family tag")
    reward_model: RewardModel
    extra_info: ExtraInfo = Field(default_factory=ExtraInfo)

    @field_validator("prompt", "reward_model", "extra_info", mode="before")
    @classmethod
    def _json_or_nested(cls, value: Any) -> Any:
        """Exports store nested columns as JSON strings too; SFT accepts a JSON prompt, so RL does as well."""
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError as e:
                raise ValueError(f"a string that is not valid JSON: {e}") from None
        return value

    @field_validator("prompt")
    @classmethod
    def _ends_with_user(cls, value: list[ChatMessage]) -> list[ChatMessage]:
        if value[-1].role != "user":
            raise ValueError(f"the last message must be the user's task, got role {value[-1].role!r}")
        return value

    @property
    def reference_code(self) -> str:
        return self.reward_model.ground_truth

    @property
    def entry_point(self) -> str:
        return self.extra_info.entry_point

    @property
    def task_uuid(self) -> str:
        """The recipe's order (uuid, else problem_id), then a hash of the source instead of a random id."""
        if self.extra_info.uuid:
            return self.extra_info.uuid
        problem_id = (self.extra_info.model_extra or {}).get("problem_id")
        if problem_id is not None and str(problem_id):
            return str(problem_id)
        return source_uuid(self.reward_model.ground_truth)

    def to_record(self) -> dict[str, Any]:
        """A plain dict for parquet writers; extras are included, None-valued known keys too."""
        return self.model_dump(mode="json")


def source_uuid(source: str) -> str:
    """Stable task id from the reference source: the same code always gets the same id."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:32]


def _plain(value: Any) -> Any:
    """numpy arrays/scalars (what parquet readers return) -> Python lists/scalars, recursively."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def raw_uuid(raw: Any) -> str | None:
    """Best-effort uuid of a row that may not validate, so an error report can name it."""
    if not isinstance(raw, Mapping):
        return None
    extra = raw.get("extra_info")
    if isinstance(extra, str):
        try:
            extra = json.loads(extra)
        except json.JSONDecodeError:
            return None
    if not isinstance(extra, Mapping):
        return None
    for key in ("uuid", "problem_id"):
        value = extra.get(key)
        if isinstance(value, (str, int, np.integer)) and str(value):
            return str(value)
    return None


def parse_row(
    raw: Mapping[str, Any], index: int | None = None, file: str | None = None, *, plain: bool = False
) -> TaskRow:
    """Validate one raw row; on failure raise RowError naming the file, `index`, uuid and the first bad field.

    plain=True says `raw` holds only Python built-ins (Arrow's to_pylist): the numpy normalization, which
    walks every value and was half the cost of validating a pool, is skipped.
    """
    if not isinstance(raw, Mapping):
        raise RowError(index, "<row>", f"expected a mapping, got {type(raw).__name__}", file=file)
    try:
        return TaskRow.model_validate(raw if plain else _plain(raw))
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "<row>"
        more = f" (+{e.error_count() - 1} more)" if e.error_count() > 1 else ""
        error = RowError(index, field, f"{first['msg']}{more}", file=file, uuid=raw_uuid(raw))
    # Raised outside the handler: no __context__, whose traceback's frames would keep the caller's data alive.
    raise error
