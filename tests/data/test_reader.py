"""Parquet reading: nested columns as structs or JSON strings; bad rows listed, never dropped silently."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from drkernel.data.reader import DataFormatError, read_rows, write_rows
from drkernel.data.schema import parse_row

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
    assert "2 invalid row(s)" in str(info.value) and "row 1: reward_model.ground_truth" in str(info.value)
    rows, rejected = read_rows(tmp_path / "bad.parquet", skip_invalid=True)
    assert [r.task_uuid for r in rows] == ["u0", "u2", "u3", "u5"] and len(rejected) == 2


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.parquet"):
        read_rows(tmp_path / "nope.parquet")
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(DataFormatError, match="junk.parquet: 1 invalid row.*not a readable parquet file"):
        read_rows(tmp_path / "junk.parquet")
    with pytest.raises(ValueError, match="empty"):
        write_rows([], tmp_path / "empty.parquet")
