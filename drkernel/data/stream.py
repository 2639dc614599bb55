"""The prompt stream's pure core: epoch order keys, the pool's key index, row-group pieces, cursor spans.

The stream never holds the pool's rows. What it holds is a key index: for every row that passed
validation (and the token-length filter), its file, its row in that file and a 64-bit hash of its task
uuid; 20 bytes a row. The rows themselves are read back, a window of the epoch at a time, from the row
groups that hold them (actors/prompt_stream.py runs those reads as Ray Data tasks).

The order of an epoch is a permutation of the index sorted by a 64-bit hash of (seed, epoch, task uuid),
ties broken by file and row. It depends on what the rows are, not on how they are stored (struct or JSON
string, one file or eight), and it is an argsort of one int per row: milliseconds at 72k rows. The
cursor (epoch, position) plus the seed is the whole state of the stream.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from drkernel.data.arrow_check import index_columns, vouch
from drkernel.data.reader import REQUIRED_COLUMNS, DataFormatError, parquet_files
from drkernel.types.task_row import RowError, parse_row

_MASK64 = (1 << 64) - 1


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on uint64 arrays: every input bit flips about half the output bits."""
    x = x.copy()
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def uuid_hashes(uuids: list[str]) -> np.ndarray:
    """A stable 64-bit hash of each task uuid (the same uuid gets the same hash in every process)."""
    return np.fromiter(
        (int.from_bytes(hashlib.blake2b(u.encode(), digest_size=8).digest(), "big") for u in uuids),
        dtype=np.uint64,
        count=len(uuids),
    )


def order_keys(seed: int, epoch: int, hashes: np.ndarray) -> np.ndarray:
    """Sort keys of one epoch for rows with these uuid hashes."""
    salt = hashlib.blake2b(f"{seed}:{epoch}".encode(), digest_size=8).digest()
    return _mix64(hashes ^ np.uint64(int.from_bytes(salt, "big") & _MASK64))


def order_key(seed: int, epoch: int, uuid: str) -> int:
    """The sort key of one task in one epoch (what order_keys computes for a whole pool)."""
    return int(order_keys(seed, epoch, uuid_hashes([uuid]))[0])


# ---- the pool's files and their row groups ---------------------------------------------------------------------


@dataclass
class PoolFile:
    """One parquet file of the pool, from its footer alone: where each row group starts."""

    path: str
    num_rows: int
    starts: np.ndarray  # first row of each row group, then num_rows

    def row_groups(self, rows: np.ndarray) -> np.ndarray:
        """The row group holding each of these rows."""
        return np.searchsorted(self.starts, rows, side="right") - 1


def pool_files(path: str | Path) -> tuple[list[PoolFile], list[RowError]]:
    """The pool's files (footers only) and one error per required column a whole file lacks.

    An unreadable file is a DataFormatError naming it: nothing can be counted in it.
    """
    files: list[PoolFile] = []
    errors: list[RowError] = []
    for file in parquet_files(path):
        name = str(file)
        try:
            meta = pq.ParquetFile(file).metadata
        except (pa.ArrowInvalid, OSError) as e:
            error = RowError(None, "<file>", f"not a readable parquet file: {e}", file=name)
            raise DataFormatError(name, [error]) from None
        sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        files.append(PoolFile(name, meta.num_rows, np.cumsum([0, *sizes], dtype=np.int64)))
        columns = set(meta.schema.to_arrow_schema().names)
        errors += [
            RowError(None, column, f"column missing from this file ({meta.num_rows} rows)", file=name)
            for column in REQUIRED_COLUMNS
            if column not in columns
        ]
    return files, errors


def open_file(path: str, opened: dict[str, pq.ParquetFile] | None = None) -> pq.ParquetFile:
    """The parquet file at `path`, its footer parsed once per `opened` (the files of one read task): a footer's
    parse costs about a millisecond, as much as checking a hundred rows."""
    if opened is None:
        return pq.ParquetFile(path)
    if path not in opened:
        opened[path] = pq.ParquetFile(path)
    return opened[path]


def read_row_group(path: str, row_group: int, opened: dict[str, pq.ParquetFile] | None = None) -> pa.Table:
    """One row group of one file: the unit every read of the stream is made of."""
    return open_file(path, opened).read_row_group(row_group)


@dataclass
class CheckedRows:
    """The validation of one row group: the rows that passed (row in the file, uuid) and the errors."""

    rows: np.ndarray
    uuids: list[str]
    prompts: list[list[dict[str, Any]]]  # chat messages of each valid row, for the length filter
    errors: list[RowError]


def _parse(records: list[dict[str, Any]], at: np.ndarray, path: str, prompts: bool) -> CheckedRows:
    """pydantic over these records, which sit at rows `at` of file `path`."""
    rows: list[int] = []
    uuids: list[str] = []
    messages: list[Any] = []
    errors: list[RowError] = []
    for where, record in zip(at.tolist(), records):
        try:
            row = parse_row(record, where, path, plain=True)
        except RowError as e:
            errors.append(e.with_traceback(None))
            continue
        rows.append(where)
        uuids.append(row.task_uuid)
        if prompts:
            messages.append([m.model_dump(mode="json") for m in row.prompt])
    return CheckedRows(np.asarray(rows, np.int64), uuids, messages, errors)


def check_rows(table: pa.Table, path: str, first_row: int, prompts: bool = True) -> CheckedRows:
    """Validate every row of a row group that starts at `first_row` of file `path`; prompts=False leaves
    `prompts` empty (only the length filter needs them, and dumping them is a tenth of the pass)."""
    return _parse(table.to_pylist(), np.arange(table.num_rows, dtype=np.int64) + first_row, path, prompts)


def _whole(file: pq.ParquetFile, row_group: int, read: pa.Table) -> pa.Table:
    """The whole row group, decoding only the columns `read` lacks: its whole top-level columns (the large
    prompt and reference text) are not decoded a second time."""
    have = {name for name in read.column_names if read.schema.field(name).type == file.schema_arrow.field(name).type}
    rest = file.read_row_group(row_group, columns=[n for n in file.schema_arrow.names if n not in have])
    return pa.table({n: read.column(n) if n in have else rest.column(n) for n in file.schema_arrow.names})


def index_row_group(
    path: str, row_group: int, first_row: int, opened: dict[str, pq.ParquetFile] | None = None
) -> CheckedRows:
    """check_rows(prompts=False) of one row group, at a fraction of its cost: the columns validation reads are
    checked with Arrow (drkernel.data.arrow_check), and only the rows that check doubts are read whole and
    parsed by pydantic, so each bad row gets check_rows' own error."""
    file = open_file(path, opened)
    checked = file.read_row_group(row_group, columns=index_columns(file.schema_arrow))
    vouched = vouch(checked)
    if vouched is None:
        return check_rows(_whole(file, row_group, checked), path, first_row, prompts=False)
    ok, uuids = vouched
    doubted = np.flatnonzero(~ok)
    found = [u for u in uuids if u is not None]
    if not len(doubted):
        return CheckedRows(np.arange(len(ok), dtype=np.int64) + first_row, found, [], [])
    records = _whole(file, row_group, checked).take(pa.array(doubted)).to_pylist()
    again = _parse(records, doubted + first_row, path, prompts=False)
    rows = np.concatenate([np.flatnonzero(ok) + first_row, again.rows])
    order = np.argsort(rows, kind="stable")
    found += again.uuids
    return CheckedRows(rows[order], [found[i] for i in order], [], again.errors)


def rows_as_json(table: pa.Table, path: str, first_row: int, local: np.ndarray) -> list[str]:
    """The rows at these offsets of a row group, validated again and serialized (what a worker receives)."""
    taken = table.take(pa.array(local, pa.int64())).to_pylist()
    return [
        parse_row(record, first_row + int(i), path, plain=True).model_dump_json() for i, record in zip(local, taken)
    ]


# ---- the key index and the epoch order ---------------------------------------------------------------------------


@dataclass
class KeyIndex:
    """Every streamable row of the pool as (file, row, uuid hash), in file then row order."""

    file_ids: np.ndarray  # int32
    rows: np.ndarray  # int64, the row in its file
    hashes: np.ndarray  # uint64 hash of the task uuid

    @classmethod
    def build(cls, file_ids: np.ndarray, rows: np.ndarray, hashes: np.ndarray) -> KeyIndex:
        """From pieces in any order (parallel reads finish in any order): sorted by file, then row."""
        order = np.lexsort((rows, file_ids))
        return cls(file_ids[order].astype(np.int32), rows[order].astype(np.int64), hashes[order].astype(np.uint64))

    def __len__(self) -> int:
        return len(self.rows)

    def digest(self) -> str:
        """Identifies the set of rows (not their storage): a saved cursor is only valid for the same set."""
        return hashlib.blake2b(np.sort(self.hashes).tobytes(), digest_size=16).hexdigest()

    def order(self, seed: int, epoch: int) -> np.ndarray:
        """Index positions in the order of this epoch."""
        keys = order_keys(seed, epoch, self.hashes)
        return np.lexsort((self.rows, self.file_ids, keys))

    def nbytes(self) -> int:
        return self.file_ids.nbytes + self.rows.nbytes + self.hashes.nbytes


@dataclass(frozen=True)
class Piece:
    """Rows to read from one row group: their offsets in it and the epoch positions they fill."""

    file_id: int
    row_group: int
    local: np.ndarray
    positions: np.ndarray


def pieces(index: KeyIndex, files: list[PoolFile], picks: np.ndarray, positions: np.ndarray) -> list[Piece]:
    """Group the index entries `picks` (landing at `positions`) by the row group that holds them."""
    file_ids = index.file_ids[picks]
    rows = index.rows[picks]
    out: list[Piece] = []
    for file_id in np.unique(file_ids):
        mine = np.flatnonzero(file_ids == file_id)
        file = files[int(file_id)]
        groups = file.row_groups(rows[mine])
        for group in np.unique(groups):
            sel = mine[groups == group]
            out.append(Piece(int(file_id), int(group), rows[sel] - file.starts[group], positions[sel]))
    return out


TASKS_PER_CPU = 4  # read tasks per cluster CPU: enough to even out a late-starting worker, few enough to start
MIN_GROUPS_PER_TASK = 8  # a task's start and scheduling cost more than reading a few row groups


def read_tasks(num_groups: int, cpus: int, per_cpu: int = TASKS_PER_CPU) -> int:
    """How many Ray Data tasks read this many row groups on a cluster of `cpus` CPUs (at most `per_cpu` a CPU).

    A few tasks a CPU, not one per few groups: each task costs a quarter second or so to schedule and start on a
    busy 2-core box, so the 1M-row index pass as 124 tasks of 8 groups spent a third of its time between tasks.
    """
    return max(1, min(per_cpu * max(1, cpus), -(-num_groups // MIN_GROUPS_PER_TASK)))


def interleave(count: int, parts: int) -> np.ndarray:
    """A permutation of range(count) that puts every `parts`-th item together: cut into `parts` contiguous
    slices, each slice samples the whole list. Row groups listed file by file, cut this way, give each task
    some of every file, so a task never gets only the files whose storage is slow to check (JSON strings)."""
    return np.concatenate([np.arange(r, count, parts) for r in range(max(1, parts))]) if count else np.zeros(0, int)


def window_starts(rows_per_epoch: int, window_rows: int) -> np.ndarray:
    """Where each window of an epoch starts, then rows_per_epoch: ceil(n / W) windows of nearly equal size,
    none larger than W. An epoch never ends on a sliver of a window, so the next epoch's first window is
    read while a whole window is handed out, not while the last few rows are."""
    count = max(1, -(-rows_per_epoch // window_rows))
    return np.arange(count + 1, dtype=np.int64) * rows_per_epoch // count


def span(
    epoch: int, position: int, count: int, rows_per_epoch: int, num_epochs: int | None
) -> tuple[list[tuple[int, int, int]], tuple[int, int]]:
    """The (epoch, start, stop) ranges of the next `count` rows from the cursor, and the cursor after them.

    A range never crosses an epoch's end; the run stops after `num_epochs` epochs.
    """
    ranges: list[tuple[int, int, int]] = []
    while count and (num_epochs is None or epoch < num_epochs):
        stop = min(rows_per_epoch, position + count)
        ranges.append((epoch, position, stop))
        count -= stop - position
        epoch, position = (epoch + 1, 0) if stop == rows_per_epoch else (epoch, stop)
    return ranges, (epoch, position)
