"""Parquet reading: a file or a folder, nested columns as structs or JSON strings per file, one validation
pass that names every bad row by file, row, uuid and field, never dropping one silently."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from drkernel.data.reader import DataFormatError, read_rows, scan, write_rows
from drkernel.types.task_row import parse_row

REFERENCE = "import torch\nclass Model(torch.nn.Module):\n    pass\n"


def make_records(n):
    return [
        {
            "data_source": "cuda_llm",
            "prompt": [{"role": "user", "content": f"task {i}"}],
            "ability": "kernel_optimization",
            "reward_model": {"ground_truth": REFERENCE + f"# {i}\n", "style": "rule"},
            "extra_info": {"entry_point": "Model", "uuid": f"u{i}", "level": 1, "ops": ["torch.relu"], "type": "t"},
        }
        for i in range(n)
    ]


def test_write_then_read_round_trips(tmp_path):
    rows = [parse_row(r, i) for i, r in enumerate(make_records(5))]
    write_rows(rows, tmp_path / "pool.parquet")
    back, rejected = read_rows(tmp_path / "pool.parquet")
    assert rejected == [] and back == rows
    assert pq.read_schema(tmp_path / "pool.parquet").field("reward_model").type.num_fields == 2


def test_reward_model_stored_as_json_strings(tmp_path):
    records = make_records(3)
    for r in records:
        r["reward_model"] = json.dumps(r["reward_model"])
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "strings.parquet")
    rows, _ = read_rows(tmp_path / "strings.parquet")
    assert [r.reference_code for r in rows] == [REFERENCE + f"# {i}\n" for i in range(3)]


def test_bad_rows_fail_the_read_with_every_index(tmp_path):
    records = make_records(6)
    records[1]["reward_model"] = {"ground_truth": "", "style": "rule"}
    records[4]["prompt"] = [{"role": "assistant", "content": "x"}]
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "bad.parquet")
    with pytest.raises(DataFormatError) as info:
        read_rows(tmp_path / "bad.parquet")
    assert [(e.index, e.field) for e in info.value.errors] == [(1, "reward_model.ground_truth"), (4, "prompt")]
    assert "2 invalid row(s)" in str(info.value)
    assert f"{tmp_path / 'bad.parquet'}: row 1 (uuid u1): reward_model.ground_truth" in str(info.value)
    rows, rejected = read_rows(tmp_path / "bad.parquet", skip_invalid=True)
    assert [r.task_uuid for r in rows] == ["u0", "u2", "u3", "u5"] and len(rejected) == 2


def as_json_strings(records, columns=("prompt", "reward_model", "extra_info")):
    return [{**r, **{c: json.dumps(r[c]) for c in columns}} for r in records]


def test_a_folder_mixing_struct_and_json_string_files(tmp_path):
    """An 8-file export can be validated, not only trained on; Arrow never has to cast one form to the other."""
    records = make_records(9)
    folder = tmp_path / "export"
    (folder / "sub").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(records[:3]), folder / "a-00000.parquet")
    pq.write_table(pa.Table.from_pylist(as_json_strings(records[3:6])), folder / "a-00001.parquet")
    pq.write_table(pa.Table.from_pylist(as_json_strings(records[6:], ("prompt",))), folder / "sub" / "b.parquet")
    (folder / "README.md").write_text("not data")
    rows, rejected = read_rows(folder)
    assert rejected == [] and [r.task_uuid for r in rows] == [f"u{i}" for i in range(9)]
    assert rows == [parse_row(r) for r in records]


def test_bad_rows_across_files_are_named_by_file_row_and_uuid(tmp_path):
    good, bad = make_records(4), make_records(5)
    for i, r in enumerate(bad):
        r["extra_info"]["uuid"] = f"b{i}"
    bad[3]["prompt"] = [{"role": "user"}]
    pq.write_table(pa.Table.from_pylist(good), tmp_path / "0.parquet")
    pq.write_table(pa.Table.from_pylist(as_json_strings(bad)), tmp_path / "1.parquet")
    with pytest.raises(DataFormatError) as info:
        scan(tmp_path)
    (error,) = info.value.errors
    where = (error.file, error.index, error.uuid, error.field)
    assert where == (str(tmp_path / "1.parquet"), 3, "b3", "prompt.0.content")
    result = scan(tmp_path, skip_invalid=True)
    assert (result.num_rows, result.num_valid, result.num_invalid) == (9, 8, 1)
    assert [list(f.valid) for f in result.files] == [[0, 1, 2, 3], [0, 1, 2, 4]]


def test_a_file_missing_a_column_is_one_error_counting_its_rows(tmp_path):
    records = make_records(3)
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "0.parquet")
    pq.write_table(
        pa.Table.from_pylist([{k: v for k, v in r.items() if k != "reward_model"} for r in records]),
        tmp_path / "1.parquet",
    )
    result = scan(tmp_path, skip_invalid=True)
    assert result.num_invalid == 3 and result.num_valid == 3
    assert [str(e) for e in result.errors] == [
        f"{tmp_path / '1.parquet'}: row: reward_model: column missing from this file (3 rows)"
    ]


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.parquet"):
        read_rows(tmp_path / "nope.parquet")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no .parquet files in the prompt folder"):
        read_rows(tmp_path / "empty")
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(DataFormatError, match="junk.parquet: 1 invalid row.*not a readable parquet file"):
        read_rows(tmp_path / "junk.parquet")
    with pytest.raises(ValueError, match="empty"):
        write_rows([], tmp_path / "empty.parquet")


def test_reported_bad_rows_do_not_keep_the_file_in_memory(tmp_path):
    """A RowError's traceback would pin the validation frame and with it the whole Arrow table."""
    records = make_records(300)
    records[7]["prompt"] = []
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "pool.parquet")
    before = pa.total_allocated_bytes()
    result = scan(tmp_path / "pool.parquet", skip_invalid=True)
    assert result.num_invalid == 1 and pa.total_allocated_bytes() == before
