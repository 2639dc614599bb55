"""Reading prompt-pool parquet (a file or a folder of them) with one validation pass at load.

Every row of every file is validated once, before anything is handed out, and each bad row is
reported by file, row index in that file, uuid and field. By default any bad row fails the load,
listing them; with `skip_invalid=True` the bad rows are dropped and counted, so the caller can say
exactly what it left out.

Files are read one at a time and never concatenated: an export may store `prompt`, `reward_model`
or `extra_info` as structs in one file and as JSON strings in the next (Arrow could not cast one
into the other). Rows are converted to Python one record batch at a time, so the dataset never
exists as Python objects more than once (read_rows) or at all (scan, which keeps Arrow tables).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from drkernel.types.task_row import RowError, TaskRow, parse_row

_LISTED = 20  # errors spelled out in one message; the rest are counted
_BATCH_ROWS = 1024  # rows turned into Python objects at once during the validation pass
REQUIRED_COLUMNS = ("data_source", "prompt", "reward_model")


class DataFormatError(ValueError):
    """One or more rows do not fit the schema; `errors` holds every RowError, `num_invalid` counts rows."""

    def __init__(self, source: str, errors: list[RowError], num_invalid: int | None = None):
        self.errors = errors
        self.num_invalid = len(errors) if num_invalid is None else num_invalid
        shown = "; ".join(str(e) for e in errors[:_LISTED])
        more = f"; and {len(errors) - _LISTED} more" if len(errors) > _LISTED else ""
        super().__init__(f"{source}: {self.num_invalid} invalid row(s): {shown}{more}")


def parquet_files(path: str | Path) -> list[Path]:
    """The parquet files of a pool: the file itself, or every *.parquet under a folder, in name order."""
    path = Path(path)
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.parquet") if p.is_file())
        if not files:
            raise FileNotFoundError(f"no .parquet files in the prompt folder {path}")
        return files
    raise FileNotFoundError(f"prompt file or folder not found: {path}")


def read_table(path: Path) -> pa.Table:
    """One parquet file as an Arrow table; an unreadable file is a DataFormatError naming it."""
    try:
        return pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as e:
        error = RowError(None, "<file>", f"not a readable parquet file: {e}", file=str(path))
        raise DataFormatError(str(path), [error]) from None


@dataclass
class FileScan:
    """What the validation pass learned about one file: its valid rows (by index) and their task ids."""

    path: str
    num_rows: int
    valid: np.ndarray  # int64 row indices (in the file) of the rows that validated
    uuids: list[str]  # task_uuid of each valid row, aligned with `valid`
    table: pa.Table | None = None  # kept only when the caller asked for it (the prompt stream)


@dataclass
class Scan:
    """The result of one validation pass over a pool."""

    files: list[FileScan] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)
    num_invalid: int = 0

    @property
    def num_rows(self) -> int:
        return sum(f.num_rows for f in self.files)

    @property
    def num_valid(self) -> int:
        return sum(len(f.valid) for f in self.files)


RowSink = Callable[[str, int, TaskRow], None]


def _missing_columns(table: pa.Table, path: str) -> list[RowError]:
    """A required column absent from a whole file: one error for the file, not one per row."""
    return [
        RowError(None, column, f"column missing from this file ({table.num_rows} rows)", file=path)
        for column in REQUIRED_COLUMNS
        if column not in table.column_names
    ]


def _records(table: pa.Table) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row index, record) one record batch at a time, so only a batch exists as Python objects."""
    start = 0
    for batch in table.to_batches(max_chunksize=_BATCH_ROWS):
        for offset, record in enumerate(batch.to_pylist()):
            yield start + offset, record
        start += batch.num_rows


def scan_file(path: Path, keep_table: bool = False, sink: RowSink | None = None) -> tuple[FileScan, list[RowError]]:
    """Validate every row of one file; `sink(path, index, row)` sees each valid row as it is parsed."""
    name = str(path)
    table = read_table(path)
    missing = _missing_columns(table, name)
    if missing:
        empty = FileScan(name, table.num_rows, np.zeros(0, np.int64), [], table if keep_table else None)
        return empty, missing
    valid: list[int] = []
    uuids: list[str] = []
    errors: list[RowError] = []
    for index, record in _records(table):
        try:
            row = parse_row(record, index, name, plain=True)
        except RowError as e:
            errors.append(e.with_traceback(None))  # a traceback would keep this frame, and the table, alive
            continue
        valid.append(index)
        uuids.append(row.task_uuid)
        if sink is not None:
            sink(name, index, row)
    scanned = FileScan(name, table.num_rows, np.asarray(valid, np.int64), uuids, table if keep_table else None)
    return scanned, errors


def scan(path: str | Path, skip_invalid: bool = False, keep_tables: bool = False, sink: RowSink | None = None) -> Scan:
    """The one validation pass over a file or folder; raise DataFormatError on bad rows unless `skip_invalid`."""
    result = Scan()
    for file in parquet_files(path):
        scanned, errors = scan_file(file, keep_tables, sink)
        result.files.append(scanned)
        result.errors += errors
        result.num_invalid += scanned.num_rows - len(scanned.valid)
    if result.errors and not skip_invalid:
        raise DataFormatError(str(path), result.errors, result.num_invalid)
    return result


def read_rows(path: str | Path, skip_invalid: bool = False) -> tuple[list[TaskRow], list[RowError]]:
    """All valid rows of a file or folder (file order, then row order) and the rejects; see `scan`."""
    rows: list[TaskRow] = []
    result = scan(path, skip_invalid, sink=lambda _file, _index, row: rows.append(row))
    return rows, result.errors


class RowTaker:
    """Rows of an already validated table by index, each from its own record batch.

    `Table.take` concatenates a column's chunks first, which costs the whole table per call (hundreds of
    ms at 72k rows); taking inside each record batch costs only the rows taken.
    """

    def __init__(self, table: pa.Table, file: str):
        self.file = file
        self.batches = table.to_batches()
        self.starts = np.cumsum([0] + [b.num_rows for b in self.batches])

    def take(self, indices: np.ndarray) -> list[TaskRow]:
        """The rows at `indices` (row numbers in the file), parsed, in the order given."""
        indices = np.asarray(indices, np.int64)
        records: list[dict[str, Any] | None] = [None] * len(indices)
        chunks = np.searchsorted(self.starts, indices, side="right") - 1
        for chunk in np.unique(chunks):
            where = np.flatnonzero(chunks == chunk)
            local = pa.array(indices[where] - self.starts[chunk], pa.int64())
            for slot, record in zip(where, self.batches[chunk].take(local).to_pylist()):
                records[slot] = record
        return [parse_row(record, int(index), self.file, plain=True) for index, record in zip(indices, records)]


def write_rows(rows: list[TaskRow], path: str | Path) -> None:
    """Write rows as parquet with nested columns (`reward_model`, `extra_info` as structs)."""
    if not rows:
        raise ValueError(f"refusing to write an empty prompt file: {path}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([row.to_record() for row in rows]), path)
