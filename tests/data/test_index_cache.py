"""The validation verdicts kept per parquet file: named by the file's fingerprint, read back as they were stored."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from drkernel.data.index_cache import FileIndex, IndexCache, fingerprint
from drkernel.types.task_row import RowError


def write(path, n: int, text: str = "x") -> None:
    pq.write_table(pa.Table.from_pylist([{"a": f"{text}{i}"} for i in range(n)]), path)


def test_fingerprint_changes_with_the_content_and_the_mtime(tmp_path):
    a = tmp_path / "a.parquet"
    write(a, 10)
    original = fingerprint(a)
    assert original == fingerprint(a)
    stat = a.stat()
    write(a, 10, "y")  # same size, other content, and the old mtime put back: the footer's statistics differ
    os.utime(a, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert a.stat().st_size == stat.st_size and fingerprint(a) != original
    write(a, 10)  # the original content again, with a new mtime
    os.utime(a, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert fingerprint(a) != original
    (tmp_path / "c.parquet").write_bytes(b"not parquet at all")
    assert fingerprint(tmp_path / "c.parquet") is None and fingerprint(tmp_path / "missing.parquet") is None


def test_stored_verdict_reads_back_naming_the_file_it_is_asked_for(tmp_path):
    cache = IndexCache(tmp_path / "cache")
    entry = FileIndex(
        np.array([0, 2], np.int64), np.array([7, 2**64 - 1], np.uint64), [RowError(1, "prompt", "bad", uuid="u1")]
    )
    assert cache.load("k", "f.parquet") is None
    cache.store("k", entry)
    got = cache.load("k", "/data/f.parquet")
    assert got.rows.tolist() == [0, 2] and got.hashes.tolist() == [7, 2**64 - 1]
    assert [(e.file, e.index, e.field, e.message, e.uuid) for e in got.errors] == [
        ("/data/f.parquet", 1, "prompt", "bad", "u1")
    ]
    (tmp_path / "cache" / "k.npz").write_bytes(b"torn")
    assert cache.load("k", "f.parquet") is None  # an unreadable entry is a miss, not an error
