"""The Arrow check of the index pass vouches only for rows pydantic passes, with the same uuid; the rows it
doubts get pydantic's own errors, in struct and in JSON-string storage."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from drkernel.data.arrow_check import index_columns, vouch
from drkernel.data.stream import check_rows, index_row_group, pool_files, read_row_group


def record(i: int) -> dict:
    return {
        "data_source": "test",
        "prompt": [{"role": "system", "content": "be fast"}, {"role": "user", "content": f"task {i}"}],
        "ability": "kernel_optimization",
        "reward_model": {"ground_truth": f"# reference {i}\n", "style": "rule"},
        "extra_info": {
            "entry_point": "Model",
            "uuid": f"t{i:03d}",
            "level": 1,
            "ops": ["torch.relu"],
            "module_name": f"m{i}",
            "original_prompt": "x" * 50,
        },
    }


def _with(i: int, **changes) -> dict:
    """record(i) with top-level keys, or extra_info keys given as extra_<key>, replaced."""
    row = record(i)
    for key, value in changes.items():
        if key.startswith("extra_"):
            row["extra_info"][key.removeprefix("extra_")] = value
        else:
            row[key] = value
    return row


def rows() -> list[dict]:
    """Good rows, rows only pydantic can judge (no uuid), and one of each way a row can be bad."""
    out = [record(i) for i in range(40)]
    variants = [
        _with(0, extra_uuid=None),  # valid: the uuid is the reference's hash
        _with(0, extra_uuid="", extra_problem_id="p7"),  # valid: the uuid is the problem id
        _with(0, extra_ops=None, extra_level=None, extra_module_name=None),  # valid: optional keys empty
        _with(0, reward_model={"ground_truth": "", "style": "rule"}),
        _with(0, reward_model={"ground_truth": None, "style": "rule"}),
        _with(0, reward_model={"ground_truth": "x", "style": None}),
        _with(0, reward_model=None),
        _with(0, prompt=[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]),
        _with(0, prompt=[{"role": "robot", "content": "q"}, {"role": "user", "content": "q"}]),
        _with(0, prompt=[{"role": "user", "content": None}]),
        _with(0, prompt=[{"role": None, "content": "q"}]),
        _with(0, prompt=[]),
        _with(0, prompt=None),
        _with(0, data_source=""),
        _with(0, data_source=None),
        _with(0, ability=None),
        _with(0, extra_entry_point=""),
        _with(0, extra_entry_point=None),
        _with(0, extra_ops=["torch.relu", None]),
        _with(0, extra_info=None),
    ]
    for k, row in enumerate(variants):  # spread over the row groups, each with its own uuid
        if row["extra_info"] and row["extra_info"].get("uuid"):
            row["extra_info"]["uuid"] = f"v{k:03d}"
        out.insert(2 * k + 1, row)
    return out


def as_json(records: list[dict], indent: int | None = None) -> list[dict]:
    """The export form that stores the nested columns as JSON text."""
    nested = ("prompt", "reward_model", "extra_info")
    return [{**r, **{c: None if r[c] is None else json.dumps(r[c], indent=indent) for c in nested}} for r in records]


def assert_same_as_pydantic(path, vouched_at_least: int) -> None:
    """index_row_group agrees with check_rows on every row group, and the Arrow check did vouch for rows."""
    files, _ = pool_files(path)
    vouched = 0
    for group in range(len(files[0].starts) - 1):
        first = int(files[0].starts[group])
        want = check_rows(read_row_group(str(path), group), str(path), first, prompts=False)
        got = index_row_group(str(path), group, first)
        assert got.rows.tolist() == want.rows.tolist()
        assert got.uuids == want.uuids
        assert [str(e) for e in got.errors] == [str(e) for e in want.errors]
        file = pq.ParquetFile(path)
        found = vouch(file.read_row_group(group, columns=index_columns(file.schema_arrow)))
        vouched += 0 if found is None else int(found[0].sum())
    assert vouched >= vouched_at_least


def test_struct_storage_gives_pydantics_verdict_on_every_row(tmp_path):
    path = tmp_path / "struct.parquet"
    pq.write_table(pa.Table.from_pylist(rows()), path, row_group_size=8)
    assert_same_as_pydantic(path, vouched_at_least=40)
    errors = check_rows(read_row_group(str(path), 0), str(path), 0, prompts=False).errors
    assert errors and all(e.file == str(path) for e in errors)


def test_json_storage_gives_pydantics_verdict_on_every_row(tmp_path):
    path = tmp_path / "json.parquet"
    pq.write_table(pa.Table.from_pylist(as_json(rows())), path, row_group_size=8)
    assert_same_as_pydantic(path, vouched_at_least=40)


def test_json_the_arrow_reader_cannot_take_goes_to_pydantic(tmp_path):
    records = as_json(rows())  # row groups of 8: 4 good rows and 4 variants each
    records[3]["extra_info"] = "{not json"  # row group 0 goes to pydantic whole
    records[13]["reward_model"] = json.dumps({"ground_truth": "x", "style": "rule"}, indent=2)  # valid, multi-line
    records[21]["prompt"] = '[{"role": "user", "content": "a"}] '  # valid, trailing blank
    path = tmp_path / "odd.parquet"
    pq.write_table(pa.Table.from_pylist(records), path, row_group_size=8)
    assert_same_as_pydantic(path, vouched_at_least=40 - 4)  # only row group 0 is left to pydantic
