"""The shipped prompt pool `library.parquet` is valid and in step with the task sources."""

from __future__ import annotations

from drkernel.data.reader import read_rows
from drkernel.tasks import library_parquet_path, load_tasks

REBUILD = (
    "rebuild it: drkernel prepare-data --src drkernel/tasks/library "
    "--out drkernel/tasks/library.parquet --data-source drkernel_tasks"
)


def test_parquet_matches_the_library():
    rows, rejected = read_rows(library_parquet_path())
    assert rejected == []
    tasks = {t.name: t for t in load_tasks()}
    by_name = {row.extra_info.name: row for row in rows}
    assert len(by_name) == len(rows), "duplicate task names in the parquet"
    assert set(by_name) == set(tasks), REBUILD
    for name, task in tasks.items():
        row = by_name[name]
        assert row.reference_code == task.reference, f"{name}: reference changed since the build; {REBUILD}"
        assert row.extra_info.level == task.level
        assert row.extra_info.category == task.category
        assert row.extra_info.ops == task.ops
        assert row.prompt[-1].role == "user" and task.reference in row.prompt[-1].content
