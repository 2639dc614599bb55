"""A vectorised first look at a row group: which rows certainly pass TaskRow, and their uuids, without Python rows.

Validating a million rows with pydantic builds every row as Python objects (to_pylist, then the models): most of
the prompt stream's index pass. This check answers the same question for whole columns with Arrow compute
kernels, and it only ever vouches: a row it passes is one pydantic passes with the same task uuid; any row it
cannot be sure of (a null, an empty reference, a prompt not ending with the user's turn, a row without a uuid)
is doubted and goes to pydantic, which names what is wrong exactly as before. A column of a type it does not
know, or JSON it cannot parse, makes it vouch for nothing in that row group.

Exports store `prompt`, `reward_model` and `extra_info` as structs or as JSON strings: JSON strings are parsed by
Arrow's JSON reader (a row group's values as one block of JSON lines), which rejects what `json.loads` would
resolve silently (duplicate keys, lone surrogates): a row group with such a row goes to pydantic whole.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from drkernel.data.reader import REQUIRED_COLUMNS

ROLES = pa.array(["system", "user", "assistant", "tool"])
# extra_info keys the model reads: a struct file's other keys (original_prompt, ...) are never decoded here.
EXTRA_INFO_KEYS = ("entry_point", "uuid", "level", "ops", "module_name")
TOP_LEVEL = (*REQUIRED_COLUMNS, "ability", "extra_info")


class _Unsure(Exception):
    """A column this check does not know how to judge: the whole row group goes to pydantic."""


def index_columns(schema: pa.Schema) -> list[str]:
    """The columns (and struct fields) the check reads: skipping the rest is a large part of the decode."""
    columns: list[str] = []
    for name in TOP_LEVEL:
        if name not in schema.names:
            continue
        kind = schema.field(name).type
        if name == "extra_info" and pa.types.is_struct(kind):
            columns += [f"extra_info.{f.name}" for f in kind if f.name in EXTRA_INFO_KEYS]
        else:
            columns.append(name)
    return columns


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _present(values: pa.Array) -> np.ndarray:
    return values.is_valid().to_numpy(zero_copy_only=False)


def _non_empty_text(values: pa.Array) -> np.ndarray:
    """Not null and at least one character (pydantic's min_length=1 on a str)."""
    if not _is_text(values.type):
        raise _Unsure(values.type)
    return pc.fill_null(pc.greater(pc.binary_length(values), 0), False).to_numpy(zero_copy_only=False)


def _parse_json(values: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """JSON text, one value a row, parsed by Arrow in one block (so a value may span lines); and the rows left
    unparsed (null or blank)."""
    skip = pc.fill_null(pc.match_substring_regex(values, r"^\s*$"), True)
    text = values.type  # the literals take the column's string type: the kernels do not mix string widths
    lines = pc.binary_join_element_wise(
        pa.scalar('{"v":', text),
        pc.if_else(skip, pa.scalar("null", text), values),
        pa.scalar("}\n", text),
        pa.scalar("", text),
    )
    width = np.int64 if pa.types.is_large_string(lines.type) else np.int32
    ends = np.frombuffer(lines.buffers()[1], width, len(lines) + 1, lines.offset * np.dtype(width).itemsize)
    block = lines.buffers()[2].slice(int(ends[0]), int(ends[-1] - ends[0]))
    try:
        table = pj.read_json(
            pa.BufferReader(block), read_options=pj.ReadOptions(use_threads=False, block_size=max(1, block.size))
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise _Unsure(e) from None
    if table.num_rows != len(values) or table.column_names != ["v"]:
        raise _Unsure("rows and JSON lines differ")
    return table.column("v").combine_chunks(), ~skip.to_numpy(zero_copy_only=False)


def _nested(table: pa.Table, name: str) -> tuple[pa.Array, np.ndarray]:
    """A nested column as Arrow values (parsed first when stored as JSON text), and its rows not yet doubted."""
    values = table.column(name).combine_chunks()
    if _is_text(values.type):
        return _parse_json(values)
    return values, np.ones(len(values), bool)


def _check_prompt(prompt: pa.Array) -> np.ndarray:
    """A non-empty list of {role, content} turns, every role known, every content a string, the last turn the user's."""
    kind = prompt.type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or not pa.types.is_struct(kind.value_type):
        raise _Unsure(kind)
    names = {f.name for f in kind.value_type}
    if not {"role", "content"} <= names or not _is_text(kind.value_type.field("content").type):
        raise _Unsure(kind)
    if not _is_text(kind.value_type.field("role").type):
        raise _Unsure(kind)
    lengths = pc.fill_null(pc.list_value_length(prompt), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    ok = _present(prompt) & (lengths > 0)
    turns = pc.list_flatten(prompt)  # the turns of the non-null lists, in row order
    good_turn = (
        _present(turns)
        & pc.fill_null(pc.is_in(pc.struct_field(turns, "role"), value_set=ROLES), False).to_numpy(zero_copy_only=False)
        & _present(pc.struct_field(turns, "content"))
    )
    owner = np.repeat(np.arange(len(prompt)), lengths)
    ok[owner[~good_turn]] = False
    last = np.cumsum(lengths) - 1
    has = lengths > 0
    roles = pc.struct_field(turns, "role").take(pa.array(last[has]))
    ok[np.flatnonzero(has)[~pc.fill_null(pc.equal(roles, "user"), False).to_numpy(zero_copy_only=False)]] = False
    return ok


def _check_reward_model(reward: pa.Array) -> np.ndarray:
    """A struct with a non-empty ground_truth; a style, where the column has one, is a string."""
    if not pa.types.is_struct(reward.type) or reward.type.get_field_index("ground_truth") < 0:
        raise _Unsure(reward.type)
    ok = _present(reward) & _non_empty_text(pc.struct_field(reward, "ground_truth"))
    if reward.type.get_field_index("style") >= 0:
        style = pc.struct_field(reward, "style")
        if not _is_text(style.type):
            raise _Unsure(style.type)
        ok &= _present(style)
    return ok


def _check_extra_info(extra: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """The keys ExtraInfo types, and the uuid column (rows without a non-empty string uuid are doubted)."""
    kind = extra.type
    if not pa.types.is_struct(kind) or kind.get_field_index("uuid") < 0:
        raise _Unsure(kind)
    uuid = pc.struct_field(extra, "uuid")
    ok = _present(extra) & _non_empty_text(uuid)
    if kind.get_field_index("entry_point") >= 0:
        ok &= _non_empty_text(pc.struct_field(extra, "entry_point"))
    for key in ("level", "module_name"):  # int | str | None
        if kind.get_field_index(key) >= 0:
            field = kind.field(key).type
            if not (pa.types.is_integer(field) or _is_text(field) or pa.types.is_null(field)):
                raise _Unsure(field)
    if kind.get_field_index("ops") >= 0:
        ops = pc.struct_field(extra, "ops")
        if pa.types.is_null(ops.type):
            pass
        elif (pa.types.is_list(ops.type) or pa.types.is_large_list(ops.type)) and _is_text(ops.type.value_type):
            lengths = pc.fill_null(pc.list_value_length(ops), 0).to_numpy(zero_copy_only=False).astype(np.int64)
            owner = np.repeat(np.arange(len(ops)), lengths)
            ok[owner[~_present(pc.list_flatten(ops))]] = False
        elif _is_text(ops.type):  # "a, b" splits; text that may be a JSON list is left to pydantic
            ok &= ~pc.fill_null(pc.match_substring(ops, "["), False).to_numpy(zero_copy_only=False)
        else:
            raise _Unsure(ops.type)
    return ok, uuid


def vouch(table: pa.Table) -> tuple[np.ndarray, list[str | None]] | None:
    """For each row: True where it certainly passes TaskRow, with its task uuid (None where doubted).

    None: the check knows nothing about this row group (a column of an unknown type, JSON Arrow cannot parse);
    every row goes to pydantic.
    """
    if any(name not in table.column_names for name in (*REQUIRED_COLUMNS, "extra_info")):
        return None
    try:
        ok = _non_empty_text(table.column("data_source").combine_chunks())
        if "ability" in table.column_names:
            ability = table.column("ability").combine_chunks()
            if not _is_text(ability.type):
                return None
            ok &= _present(ability)
        prompt, parsed = _nested(table, "prompt")
        ok &= parsed & _check_prompt(prompt)
        reward, parsed = _nested(table, "reward_model")
        ok &= parsed & _check_reward_model(reward)
        extra, parsed = _nested(table, "extra_info")
        extra_ok, uuid = _check_extra_info(extra)
        ok &= parsed & extra_ok
    except _Unsure:
        return None
    uuids = uuid.to_pylist()
    return ok, [u if good else None for u, good in zip(uuids, ok)]
