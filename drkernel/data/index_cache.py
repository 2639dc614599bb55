"""What the prompt stream's validation pass learned about one parquet file, kept on disk by the file's fingerprint.

The pass validates every row of the pool (minutes of CPU at a million rows) and keeps only a few numbers a
row: which rows are valid, their uuid hashes, and the bad rows' errors. Those only change when the file or
the validation rules do, so a second job, a resume, or a restarted prompt actor reads them back instead.

The fingerprint is the file's size, modification time and parquet footer (which records every column
chunk's offset, size and statistics), with the schema's version: any rewrite of the file, and any change of
what a valid row is, gives a new name. It costs one small read per file, where a digest of the bytes would
read the whole pool.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from drkernel.types.task_row import RowError, TaskRow

_TAIL = 8  # a parquet file ends with the footer's length (4 bytes, little endian) and b"PAR1"
_VERSION = "1"


def default_cache_dir() -> Path:
    """$DRKERNEL_CACHE_DIR/prompt_index, else ~/.cache/drkernel/prompt_index."""
    root = os.environ.get("DRKERNEL_CACHE_DIR") or Path.home() / ".cache" / "drkernel"
    return Path(root) / "prompt_index"


def _rules() -> str:
    """What decides a row's validity and uuid: a changed schema must not reuse an old verdict."""
    return json.dumps(TaskRow.model_json_schema(), sort_keys=True)


_RULES = hashlib.blake2b(_rules().encode(), digest_size=8).hexdigest()


def fingerprint(path: str | Path) -> str | None:
    """Size, mtime and footer of a parquet file, digested; None when it has no readable footer."""
    try:
        with open(path, "rb") as f:
            stat = os.fstat(f.fileno())
            if stat.st_size < 2 * _TAIL:
                return None
            f.seek(-_TAIL, os.SEEK_END)
            tail = f.read(_TAIL)
            length = int.from_bytes(tail[:4], "little")
            if tail[4:] != b"PAR1" or length + _TAIL > stat.st_size:
                return None
            f.seek(-(_TAIL + length), os.SEEK_END)
            footer = f.read(length)
    except OSError:
        return None
    digest = hashlib.blake2b(f"{_VERSION}:{_RULES}:{stat.st_size}:{stat.st_mtime_ns}:".encode(), digest_size=16)
    digest.update(footer)
    return digest.hexdigest()


@dataclass
class FileIndex:
    """One file's verdict: its valid rows (row in the file) with their uuid hashes, and its bad rows."""

    rows: np.ndarray  # int64
    hashes: np.ndarray  # uint64
    errors: list[RowError]


class IndexCache:
    """FileIndex entries in a folder, one .npz file per fingerprint."""

    def __init__(self, cache_dir: str | Path | None = None):
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()

    def _path(self, key: str) -> Path:
        return self.cache_dir / f"{key}.npz"

    def load(self, key: str | None, file: str) -> FileIndex | None:
        """The entry for this fingerprint (errors naming `file`), or None when absent or unreadable."""
        if key is None:
            return None
        try:
            with np.load(self._path(key), allow_pickle=False) as data:
                rows, hashes, errors = data["rows"], data["hashes"], json.loads(str(data["errors"]))
        except (OSError, ValueError, KeyError):
            return None
        if rows.dtype != np.int64 or hashes.dtype != np.uint64 or rows.shape != hashes.shape:
            return None
        found = [RowError(e["row"], e["field"], e["message"], file=file, uuid=e["uuid"]) for e in errors]
        return FileIndex(rows, hashes, found)

    def store(self, key: str | None, entry: FileIndex) -> None:
        """Write atomically: a concurrent reader sees the old entry or the whole new one."""
        if key is None:
            return
        errors = [{"row": e.index, "field": e.field, "message": e.message, "uuid": e.uuid} for e in entry.errors]
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.cache_dir, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(
                    f,
                    rows=entry.rows.astype(np.int64),
                    hashes=entry.hashes.astype(np.uint64),
                    errors=np.asarray(json.dumps(errors)),
                )
            os.replace(tmp, self._path(key))
        except BaseException:
            os.unlink(tmp)
            raise
