"""Reading and writing prompt-pool parquet files without losing or hiding a row.

A bad row is reported by its index and field. By default any bad row fails the read, listing all
of them; with `skip_invalid=True` the good rows come back together with the list of rejected ones,
so the caller can say exactly what it dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from drkernel.data.schema import RowError, TaskRow, parse_row

_LISTED = 20  # errors spelled out in one message; the rest are counted


class DataFormatError(ValueError):
    """One or more rows do not fit the schema; `errors` holds every RowError."""

    def __init__(self, source: str, errors: list[RowError]):
        self.errors = errors
        shown = "; ".join(str(e) for e in errors[:_LISTED])
        more = f"; and {len(errors) - _LISTED} more" if len(errors) > _LISTED else ""
        super().__init__(f"{source}: {len(errors)} invalid row(s): {shown}{more}")


def validate_records(
    records: Iterable[Mapping[str, Any]], source: str = "<records>", skip_invalid: bool = False
) -> tuple[list[TaskRow], list[RowError]]:
    """Parse every record; raise DataFormatError unless `skip_invalid`, then return the rejects too."""
    rows: list[TaskRow] = []
    errors: list[RowError] = []
    for index, record in enumerate(records):
        try:
            rows.append(parse_row(record, index))
        except RowError as e:
            errors.append(e)
    if errors and not skip_invalid:
        raise DataFormatError(source, errors)
    return rows, errors


def read_rows(path: str | Path, skip_invalid: bool = False) -> tuple[list[TaskRow], list[RowError]]:
    """All rows of a parquet file, validated; see validate_records for `skip_invalid`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"prompt file not found: {path}")
    try:
        table = pq.read_table(path)
    except pa.ArrowInvalid as e:
        raise DataFormatError(str(path), [RowError(None, "<file>", f"not a readable parquet file: {e}")]) from None
    return validate_records(table.to_pylist(), str(path), skip_invalid)


def write_rows(rows: list[TaskRow], path: str | Path) -> None:
    """Write rows as parquet with nested columns (`reward_model`, `extra_info` as structs)."""
    if not rows:
        raise ValueError(f"refusing to write an empty prompt file: {path}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([row.to_record() for row in rows]), path)
