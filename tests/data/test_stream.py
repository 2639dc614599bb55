"""The prompt stream's pure core: cursor spans, the key index and its epoch order, row-group pieces, and the
validation of one row group (no Ray here; the stream over Ray Data is tested in tests/actors)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from drkernel.data.reader import DataFormatError
from drkernel.data.stream import (
    KeyIndex,
    check_rows,
    interleave,
    pieces,
    pool_files,
    read_row_group,
    read_tasks,
    rows_as_json,
    span,
    uuid_hashes,
    window_starts,
)
from drkernel.types.task_row import TaskRow


def record(i: int) -> dict:
    return {
        "data_source": "test",
        "prompt": [{"role": "user", "content": f"task {i}"}],
        "reward_model": {"ground_truth": f"# reference {i}\n", "style": "rule"},
        "extra_info": {"entry_point": "Model", "uuid": f"t{i:02d}"},
    }


def test_span_crosses_epochs_and_stops_after_the_last():
    assert span(0, 3, 4, 10, None) == ([(0, 3, 7)], (0, 7))
    assert span(0, 8, 5, 10, None) == ([(0, 8, 10), (1, 0, 3)], (1, 3))
    assert span(0, 8, 25, 10, None) == ([(0, 8, 10), (1, 0, 10), (2, 0, 10), (3, 0, 3)], (3, 3))
    assert span(1, 8, 5, 10, 2) == ([(1, 8, 10)], (2, 0))
    assert span(2, 0, 5, 10, 2) == ([], (2, 0))
    assert span(0, 10, 2, 10, None) == ([(0, 10, 10), (1, 0, 2)], (1, 2))  # a cursor parked at the end


def test_key_index_is_the_same_whatever_order_the_reads_finish_in():
    rng = np.random.default_rng(0)
    file_ids = np.repeat(np.arange(3), 5)
    rows = np.tile(np.arange(5), 3)
    hashes = uuid_hashes([f"u{i}" for i in range(15)])
    shuffled = rng.permutation(15)
    a = KeyIndex.build(file_ids, rows, hashes)
    b = KeyIndex.build(file_ids[shuffled], rows[shuffled], hashes[shuffled])
    assert (a.file_ids == b.file_ids).all() and (a.rows == b.rows).all() and (a.hashes == b.hashes).all()
    assert a.digest() == b.digest()
    for epoch in range(3):
        order = a.order(7, epoch)
        assert sorted(order.tolist()) == list(range(15))
        assert (order == b.order(7, epoch)).all()
    assert not (a.order(7, 0) == a.order(7, 1)).all()
    assert KeyIndex.build(file_ids[:-1], rows[:-1], hashes[:-1]).digest() != a.digest()


def test_pieces_name_the_row_groups_and_offsets_that_hold_the_picks(tmp_path):
    path = tmp_path / "pool.parquet"
    pq.write_table(pa.Table.from_pylist([record(i) for i in range(10)]), path, row_group_size=4)
    files, errors = pool_files(path)
    assert errors == [] and files[0].starts.tolist() == [0, 4, 8, 10]
    index = KeyIndex.build(np.zeros(10, np.int32), np.arange(10), uuid_hashes([f"t{i:02d}" for i in range(10)]))
    picks = np.array([9, 0, 5, 4])
    plan = pieces(index, files, picks, np.arange(100, 104))
    got = {(p.row_group, tuple(p.local.tolist()), tuple(p.positions.tolist())) for p in plan}
    assert got == {(0, (0,), (101,)), (1, (1, 0), (102, 103)), (2, (1,), (100,))}
    delivered = {}
    for p in plan:
        table = read_row_group(str(path), p.row_group)
        rows = rows_as_json(table, str(path), int(files[0].starts[p.row_group]), p.local)
        delivered.update(zip(p.positions.tolist(), (TaskRow.model_validate_json(r).task_uuid for r in rows)))
    assert delivered == {100: "t09", 101: "t00", 102: "t05", 103: "t04"}


def test_check_rows_names_bad_rows_by_their_row_in_the_file(tmp_path):
    records = [record(i) for i in range(6)]
    records[4]["reward_model"] = {"ground_truth": "", "style": "rule"}
    records = [{**r, "extra_info": json.dumps(r["extra_info"])} for r in records]  # JSON-string storage
    table = pa.Table.from_pylist(records).slice(3)  # a row group starting at row 3
    checked = check_rows(table, "f.parquet", 3)
    assert checked.rows.tolist() == [3, 5] and checked.uuids == ["t03", "t05"]
    assert [(e.file, e.index, e.uuid, e.field) for e in checked.errors] == [
        ("f.parquet", 4, "t04", "reward_model.ground_truth")
    ]
    assert checked.prompts[0] == [{"role": "user", "content": "task 3"}]


def test_pool_files_report_missing_columns_and_unreadable_files(tmp_path):
    pq.write_table(pa.Table.from_pylist([{"data_source": "x", "prompt": "[]"}] * 3), tmp_path / "a.parquet")
    files, errors = pool_files(tmp_path)
    assert files[0].num_rows == 3
    assert [(e.field, e.index) for e in errors] == [("reward_model", None)]
    (tmp_path / "b.parquet").write_text("not parquet")
    with pytest.raises(DataFormatError, match="b.parquet.*not a readable parquet file"):
        pool_files(tmp_path)


def test_windows_cover_the_epoch_none_larger_than_asked_and_no_sliver_at_the_end():
    for rows, window in [(10, 4), (999_888, 16_384), (5, 8), (16_384, 16_384), (16_385, 16_384)]:
        starts = window_starts(rows, window)
        sizes = np.diff(starts)
        assert starts[0] == 0 and starts[-1] == rows
        assert sizes.max() <= window and sizes.min() >= sizes.max() - 1  # nearly equal: the last is no sliver
        assert len(sizes) == -(-rows // window)


def test_reads_run_as_a_few_tasks_a_cpu_and_never_as_tiny_ones():
    assert read_tasks(992, 2) == 4 * 2  # the 1M pool on 2 CPUs: 8 tasks of 124 row groups, not 124 of 8
    assert read_tasks(992, 64) == -(-992 // 8)  # a big cluster: every task still reads at least 8 groups
    assert read_tasks(4, 2) == 1  # a cursor's first few rows: one task
    assert read_tasks(1, 0) == read_tasks(0, 2) == 1


def test_each_task_gets_a_share_of_every_file():
    files, groups = 4, 31  # row groups listed file by file, as the stream lists them
    listed = np.repeat(np.arange(files), groups)
    for tasks in (1, 3, 8, 124):
        order = interleave(len(listed), tasks)
        assert sorted(order.tolist()) == list(range(len(listed)))
        for part in np.array_split(order, tasks):  # how Ray Data's from_items cuts items into blocks
            counts = np.bincount(listed[part], minlength=files)
            assert counts.max() - counts.min() <= 1, (tasks, counts)
    assert interleave(0, 8).tolist() == []
