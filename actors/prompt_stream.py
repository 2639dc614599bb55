"""The RL prompt stream: Ray Data reads, validates and length-filters the parquet pool; one process keeps a cursor.

Two Ray Data pipelines, both over the pool's row groups (read from the parquet footers), both spread over the
cluster's CPUs as ordinary Ray Data tasks:

- the index pass, at load: every row group is read and every row validated (drkernel.data.arrow_check
  checks the columns validation needs with Arrow, and drkernel.types.task_row parses the rows it doubts) and,
  with a length limit, its prompt tokenized (drkernel.data.lengths caches the counts per file). What comes
  back is the key index (file, row, uuid hash; 20 bytes a row) and the bad rows by file, row and uuid: with
  any bad row the load fails naming them, unless skip_invalid. Each file's verdict is kept by the file's
  fingerprint (drkernel.data.index_cache): a file seen before is not read again.
- window reads, ahead of the cursor: the rows of the k-th window of an epoch's order, grouped by
  the row groups that hold them, are read back, validated again and handed over as JSON. The window after
  the cursor's (and the next epoch's first window and order) is prepared in a background thread while the
  current one is handed out; a cursor that lands outside what is prepared (a resume, a rewind) first reads a
  few rows at the cursor, which touch only a few row groups, then the whole window behind them.

Row groups, not `ray.data.read_parquet`, are the unit of the reads: exact resume and bad-row reports need
each row's position in its file, and a window needs a few thousand rows scattered over the pool, which
read_parquet can neither name nor select. The process holding the stream holds the key index and at most
two windows of rows: its memory does not grow with the pool; the pool's size costs cluster CPU time (one
index pass, then one read of the touched row groups per window), which Ray Data spreads over the cluster.
"""

from __future__ import annotations

import logging
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import ray

from drkernel.data.index_cache import FileIndex, IndexCache, fingerprint
from drkernel.data.lengths import PromptLengths, count_tokens
from drkernel.data.reader import DataFormatError
from drkernel.data.stream import (
    TASKS_PER_CPU,
    KeyIndex,
    PoolFile,
    check_rows,
    index_row_group,
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
from drkernel.types.task_row import RowError, TaskRow

_log = logging.getLogger("drkernel.data.stream")


# One entry per row of the index pass: valid (field "") or not.
_INDEX_COLUMNS: dict[str, Any] = {
    "file_id": np.int32,
    "row": np.int64,
    "hash": np.uint64,
    "length": np.int64,
    "computed": bool,
    "field": object,
    "message": object,
    "uuid": object,
}


def _read_dataset(items: list[dict[str, Any]], per_cpu: int) -> ray.data.Dataset:
    """The row groups in `items` as a Ray Data dataset of at most `per_cpu` blocks (= tasks) a cluster CPU, each
    block holding some of every file's groups (drkernel.data.stream.read_tasks, interleave)."""
    tasks = read_tasks(len(items), int(ray.cluster_resources().get("CPU", 1)), per_cpu)
    return ray.data.from_items([items[i] for i in interleave(len(items), tasks)], override_num_blocks=tasks)


def _index_pieces(
    batch: dict[str, np.ndarray], paths: list[str], tokenizer: Any = None, cached: dict[int, np.ndarray] | None = None
) -> dict[str, np.ndarray]:
    """Ray Data transform: validate row groups; with a tokenizer, the token length of each valid prompt
    (from `cached`, a file's cached lengths, where known; tokenized here otherwise)."""
    cols: dict[str, list[Any]] = {k: [] for k in _INDEX_COLUMNS}
    opened: dict[str, Any] = {}
    for file_id, group, first in zip(batch["file_id"], batch["row_group"], batch["first_row"]):
        file_id = int(file_id)
        path = paths[file_id]
        if tokenizer is None:
            checked = index_row_group(path, int(group), int(first), opened)
        else:
            checked = check_rows(read_row_group(path, int(group), opened), path, int(first))
        lengths = np.full(len(checked.rows), -1, np.int64)
        if tokenizer is not None and len(checked.rows):
            known = (cached or {}).get(file_id)
            if known is not None:
                lengths = known[checked.rows].copy()
            missing = np.flatnonzero(lengths < 0)
            if len(missing):
                lengths[missing] = count_tokens(tokenizer, [checked.prompts[i] for i in missing])
        computed = np.zeros(len(checked.rows), bool)
        if tokenizer is not None and len(checked.rows):
            computed[missing] = True
        n_bad = len(checked.errors)
        cols["file_id"] += [file_id] * (len(checked.rows) + n_bad)
        cols["row"] += [*checked.rows.tolist(), *(e.index for e in checked.errors)]
        cols["hash"] += [*uuid_hashes(checked.uuids).tolist(), *[0] * n_bad]
        cols["length"] += [*lengths.tolist(), *[-1] * n_bad]
        cols["computed"] += [*computed.tolist(), *[False] * n_bad]
        cols["field"] += [""] * len(checked.rows) + [e.field for e in checked.errors]
        cols["message"] += [""] * len(checked.rows) + [e.message for e in checked.errors]
        cols["uuid"] += [""] * len(checked.rows) + [e.uuid or "" for e in checked.errors]
    return {k: np.asarray(v, dtype=_INDEX_COLUMNS[k]) for k, v in cols.items()}


def _read_pieces(batch: dict[str, np.ndarray], paths: list[str]) -> dict[str, np.ndarray]:
    """Ray Data transform: the rows a window needs from these row groups, as compressed JSON (a quarter of
    the bytes a window would hold as text), with their positions."""
    positions: list[np.ndarray] = []
    rows: list[bytes] = []
    opened: dict[str, Any] = {}
    for file_id, group, first, local, where in zip(
        batch["file_id"], batch["row_group"], batch["first_row"], batch["local"], batch["positions"]
    ):
        path = paths[int(file_id)]
        table = read_row_group(path, int(group), opened)
        found = rows_as_json(table, path, int(first), np.asarray(local, np.int64))
        rows += [zlib.compress(row.encode(), 1) for row in found]
        positions.append(np.asarray(where, np.int64))
    return {"position": np.concatenate(positions), "row": np.asarray(rows, dtype=object)}


def _quiet_ray_data() -> None:
    """Ray Data prints a progress bar, a plan and a summary for every execution; a stream runs one per window."""
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)


class PromptStream:
    """Seeded, resumable, epoch-shuffled batches of TaskRow from a parquet file or folder, read by Ray Data.

    skip_invalid: drop rows that fail validation (counted in `stats`, listed in `invalid_rows`) instead of
    failing the load. max_prompt_tokens + tokenizer: drop rows whose chat prompt is longer than the policy's
    context budget for it (counted in `stats`; lengths cached, see drkernel.data.lengths). window_rows: rows
    read per window; head_rows: rows read at once where the cursor lands outside a prepared window.
    task_cpus: Ray CPUs of each read task; tasks_per_cpu: at most this many read tasks per cluster CPU (a task
    costs more to start than a row group to read; drkernel.data.stream.read_tasks). index_cache_dir: where each
    file's validation verdict is kept (drkernel.data.index_cache; default $DRKERNEL_CACHE_DIR/prompt_index).
    """

    def __init__(
        self,
        path: str | Path,
        batch_size: int,
        seed: int = 0,
        num_epochs: int | None = None,
        *,
        skip_invalid: bool = False,
        max_prompt_tokens: int | None = None,
        tokenizer: Any = None,
        length_cache_dir: str | Path | None = None,
        window_rows: int = 16384,
        head_rows: int = 4,
        task_cpus: float = 1.0,
        tasks_per_cpu: int = TASKS_PER_CPU,
        index_cache_dir: str | Path | None = None,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if num_epochs is not None and num_epochs < 1:
            raise ValueError(f"num_epochs must be >= 1 or None, got {num_epochs}")
        if max_prompt_tokens is not None and (max_prompt_tokens < 1 or tokenizer is None):
            raise ValueError(f"max_prompt_tokens must be >= 1 and needs a tokenizer, got {max_prompt_tokens}")
        if window_rows < 1 or head_rows < 1 or task_cpus <= 0 or tasks_per_cpu < 1:
            raise ValueError(
                "window_rows, head_rows, task_cpus and tasks_per_cpu must be > 0, "
                f"got {window_rows, head_rows, task_cpus, tasks_per_cpu}"
            )
        self.path = str(path)
        self.batch_size = batch_size
        self.seed = seed
        self.num_epochs = num_epochs
        self.skip_invalid = skip_invalid
        self.max_prompt_tokens = max_prompt_tokens
        self.window_rows = window_rows
        self.head_rows = head_rows
        self.task_cpus = task_cpus
        self.tasks_per_cpu = tasks_per_cpu
        self._tokenizer = tokenizer
        self._lengths = PromptLengths(tokenizer, length_cache_dir) if max_prompt_tokens is not None else None
        self._index_cache = IndexCache(index_cache_dir)
        self.epoch = 0
        self.position = 0
        self.invalid_rows: list[RowError] = []
        self.stats: dict[str, int] = {}
        self._digest = ""
        self._index: KeyIndex | None = None
        self._files: list[PoolFile] = []
        self._orders: dict[int, np.ndarray] = {}
        self._windows: dict[tuple[int, int], dict[int, bytes]] = {}  # (epoch, window) -> position -> row
        self._pending: dict[tuple[int, int], Future] = {}
        self._starts: np.ndarray | None = None  # where each window of an epoch starts (drkernel.data.stream)
        self._headed: set[tuple[int, int]] = set()  # windows whose first rows were read in the foreground
        self._background = ThreadPoolExecutor(1, thread_name_prefix="prompt-window")
        self._load()

    # ---- the index pass -------------------------------------------------------------------------------------------
    def _load(self) -> None:
        """Validate every row group through Ray Data (files whose verdict is cached are not read again); keep
        only the key index of the streamable rows."""
        _quiet_ray_data()
        files, errors = pool_files(self.path)
        paths = [f.path for f in files]
        whole_file_errors = {e.file for e in errors}
        caches: dict[int, tuple[Path, np.ndarray | None]] = {}
        if self._lengths is not None:
            caches = {i: self._lengths.cached(f.path) for i, f in enumerate(files)}
        cached = {
            i: known
            for i, (_, known) in caches.items()
            if known is not None and known.shape == (files[i].num_rows,) and known.dtype == np.int64
        }
        keys = {i: fingerprint(f.path) for i, f in enumerate(files) if f.path not in whole_file_errors}
        verdicts: dict[int, FileIndex] = {}
        for i, key in keys.items():
            entry = self._index_cache.load(key, paths[i])
            if entry is not None and (self._lengths is None or (i in cached and (cached[i][entry.rows] >= 0).all())):
                verdicts[i] = entry
        items = [
            {"file_id": i, "row_group": g, "first_row": int(files[i].starts[g])}
            for i in keys
            if i not in verdicts
            for g in range(len(files[i].starts) - 1)
        ]
        cols = self._index_pass(items, paths, cached)
        bad = cols["field"] != ""
        row_errors = [
            RowError(
                int(cols["row"][where]),
                str(cols["field"][where]),
                str(cols["message"][where]),
                file=paths[int(cols["file_id"][where])],
                uuid=str(cols["uuid"][where]) or None,
            )
            for where in np.flatnonzero(bad)[np.lexsort((cols["row"][bad], cols["file_id"][bad]))]
        ]
        good = {k: v[~bad] for k, v in cols.items() if k in ("file_id", "row", "hash", "length", "computed")}
        for i in keys.keys() - verdicts.keys():
            mine = good["file_id"] == i
            entry = FileIndex(good["row"][mine], good["hash"][mine], [e for e in row_errors if e.file == paths[i]])
            self._index_cache.store(keys[i], entry)
        for i, entry in verdicts.items():
            known = cached[i][entry.rows] if self._lengths is not None else np.full(len(entry.rows), -1, np.int64)
            extra = {
                "file_id": np.full(len(entry.rows), i, np.int32),
                "row": entry.rows,
                "hash": entry.hashes,
                "length": known,
                "computed": np.zeros(len(entry.rows), bool),
            }
            good = {k: np.concatenate([v, extra[k]]) for k, v in good.items()}
            row_errors += entry.errors
        errors += sorted(row_errors, key=lambda e: (paths.index(e.file), e.index))
        num_rows = sum(f.num_rows for f in files)
        num_invalid = num_rows - len(good["row"])
        if errors and not self.skip_invalid:
            raise DataFormatError(self.path, errors, num_invalid)
        too_long = 0
        if self._lengths is not None:
            self._store_lengths(files, caches, cached, good)
            keep = good["length"] <= self.max_prompt_tokens
            too_long = int((~keep).sum())
            good = {k: v[keep] for k, v in good.items()}
        index = KeyIndex.build(good["file_id"], good["row"], good["hash"])
        if len(index) == 0:
            raise ValueError(
                f"{self.path}: no rows to train on ({num_rows} rows, {num_invalid} invalid, "
                f"{too_long} longer than {self.max_prompt_tokens} tokens)"
            )
        digest = index.digest()
        if self._digest and digest != self._digest:
            raise ValueError(f"{self.path}: the prompt pool changed on disk since this stream was opened")
        self._digest, self._index, self._files = digest, index, files
        self.invalid_rows = errors
        self.stats = {
            "rows": num_rows,
            "rows_invalid": num_invalid,
            "rows_too_long": too_long,
            "rows_per_epoch": len(index),
        }
        if num_invalid:
            shown = "; ".join(str(e) for e in errors[:3])
            _log.warning("%s: skipped %d invalid row(s) of %d: %s", self.path, num_invalid, num_rows, shown)
        if too_long:
            _log.warning(
                "%s: skipped %d row(s) whose prompt is longer than %d tokens",
                self.path,
                too_long,
                self.max_prompt_tokens,
            )

    def _index_pass(
        self, items: list[dict[str, int]], paths: list[str], cached: dict[int, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """The Ray Data pipeline over every row group: one entry per row, valid (field "") or not."""
        if not items:
            return {k: np.zeros(0, dtype) for k, dtype in _INDEX_COLUMNS.items()}
        tokenizer = self._tokenizer if self._lengths is not None else None
        ds = _read_dataset(items, self.tasks_per_cpu).map_batches(
            _index_pieces,
            batch_size=None,
            num_cpus=self.task_cpus,
            fn_kwargs={"paths": paths, "tokenizer": tokenizer, "cached": cached},
        )
        parts = list(ds.iter_batches(batch_size=None, batch_format="numpy"))
        return {k: np.concatenate([p[k] for p in parts]) for k in _INDEX_COLUMNS}

    def _store_lengths(
        self,
        files: list[PoolFile],
        caches: dict[int, tuple[Path, np.ndarray | None]],
        cached: dict[int, np.ndarray],
        good: dict[str, np.ndarray],
    ) -> None:
        """Write the lengths the index pass tokenized into each file's cache, beside what was cached."""
        assert self._lengths is not None
        for i, f in enumerate(files):
            new = good["computed"] & (good["file_id"] == i)
            if new.any():
                lengths = cached[i].copy() if i in cached else np.full(f.num_rows, -1, np.int64)
                lengths[good["row"][new]] = good["length"][new]
                self._lengths.store(caches[i][0], lengths, int(new.sum()))

    # ---- windows of rows ahead of the cursor ----------------------------------------------------------------------
    def _order(self, epoch: int) -> np.ndarray:
        """Index positions in epoch order (computed once per epoch; the window reads compute the next one early)."""
        order = self._orders.get(epoch)
        if order is None:
            assert self._index is not None
            order = self._orders[epoch] = self._index.order(self.seed, epoch)
        return order

    def _read(self, epoch: int, start: int, stop: int) -> dict[int, bytes]:
        """Rows at positions [start, stop) of an epoch, by position, through one Ray Data pipeline."""
        assert self._index is not None
        positions = np.arange(start, stop, dtype=np.int64)
        plan = pieces(self._index, self._files, self._order(epoch)[start:stop], positions)
        items = [
            {
                "file_id": p.file_id,
                "row_group": p.row_group,
                "first_row": int(self._files[p.file_id].starts[p.row_group]),
                "local": p.local.tolist(),
                "positions": p.positions.tolist(),
            }
            for p in plan
        ]
        ds = _read_dataset(items, self.tasks_per_cpu).map_batches(
            _read_pieces, batch_size=None, num_cpus=self.task_cpus, fn_kwargs={"paths": [f.path for f in self._files]}
        )
        out: dict[int, bytes] = {}
        for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
            out.update(zip(batch["position"].tolist(), batch["row"].tolist()))
        return out

    def _window(self, epoch: int, position: int) -> tuple[int, int, int]:
        """(window number, first, end position) of the window holding `position`."""
        starts = self._window_starts()
        k = min(int(np.searchsorted(starts, position, side="right")) - 1, len(starts) - 2)
        return k, int(starts[k]), int(starts[k + 1])

    def _window_starts(self) -> np.ndarray:
        if self._starts is None or self._starts[-1] != self.rows_per_epoch:
            self._starts = window_starts(self.rows_per_epoch, self.window_rows)
        return self._starts

    def _prefetch(self, epoch: int, position: int, read: bool = True) -> None:
        """Read, in the background, the window at the cursor and the one after it (the next epoch's first);
        forget every other window, so at most two are held whatever the cursor did (a resume, a rewind).

        read=False only forgets: a cursor that was just moved reads a few rows at itself first, and the
        reads of its whole window must not be queued on the cluster's CPUs ahead of those.
        """
        keep: set[tuple[int, int]] = set()
        if self.num_epochs is None or epoch < self.num_epochs:
            k, _, end = self._window(epoch, position)
            keep = {(epoch, k), (epoch, k + 1) if end < self.rows_per_epoch else (epoch + 1, 0)}
            keep = {key for key in keep if self.num_epochs is None or key[0] < self.num_epochs}
        for e, w in sorted(keep - set(self._windows) - set(self._pending)) if read else []:
            first, stop = (int(x) for x in self._window_starts()[w : w + 2])
            self._pending[(e, w)] = self._background.submit(self._read, e, first, stop)
        for key in set(self._windows) - keep:
            del self._windows[key]
        for key in set(self._pending) - keep:
            self._pending.pop(key).cancel()  # one already running finishes, and its rows are dropped
        self._headed &= keep
        for stale in [e for e in list(self._orders) if e < epoch]:  # the reading thread may add one
            del self._orders[stale]

    def _collect(self, key: tuple[int, int], wait: bool) -> None:
        """Move a finished (or, with `wait`, a running) background read into the windows."""
        future = self._pending.get(key)
        if future is not None and (wait or future.done()):
            del self._pending[key]
            self._windows.setdefault(key, {}).update(future.result())

    def _rows(self, epoch: int, start: int, stop: int) -> list[bytes]:
        """Rows (compressed JSON) at [start, stop) of an epoch (inside one window), reading what is not there yet."""
        k, _, end = self._window(epoch, start)
        key = (epoch, k)
        self._collect(key, wait=False)
        window = self._windows.get(key, {})
        if any(p not in window for p in range(start, stop)):
            if key in self._pending and key in self._headed:
                self._collect(key, wait=True)
            else:  # the cursor landed here cold: read a few rows now, the window behind them
                self._headed.add(key)
                window = self._windows.setdefault(key, {})
                window.update(self._read(epoch, start, min(end, max(stop, start + self.head_rows))))
                if key not in self._pending and any(p not in window for p in range(start, end)):
                    self._pending[key] = self._background.submit(self._read, epoch, start, end)
            window = self._windows[key]
            if any(p not in window for p in range(start, stop)):
                self._collect(key, wait=True)
        return [self._windows[key][p] for p in range(start, stop)]

    # ---- the stream -----------------------------------------------------------------------------------------------
    @property
    def rows_per_epoch(self) -> int:
        return len(self._index) if self._index is not None else self.stats.get("rows_per_epoch", 0)

    def metrics(self) -> dict[str, float]:
        """The pool's counts for the job's metrics (rows seen, dropped as invalid, dropped as too long)."""
        return {f"data/{key}": float(value) for key, value in self.stats.items()}

    def next_batch(self) -> list[TaskRow]:
        """Up to batch_size rows (a batch may span two epochs); [] once num_epochs are done.

        The cursor moves only after the whole batch is built, so an exception loses and repeats nothing.
        """
        if self.num_epochs is not None and self.epoch >= self.num_epochs:
            return []
        if self._index is None:
            self._load()
        ranges, cursor = span(self.epoch, self.position, self.batch_size, self.rows_per_epoch, self.num_epochs)
        rows: list[bytes] = []
        for epoch, start, stop in ranges:
            while start < stop:  # a batch may cross a window's end too
                _, _, end = self._window(epoch, start)
                rows += self._rows(epoch, start, min(stop, end))
                start = min(stop, end)
        batch = [TaskRow.model_validate_json(zlib.decompress(row)) for row in rows]
        self.epoch, self.position = cursor
        self._prefetch(*cursor)
        return batch

    def close(self) -> None:
        """Release the index and the read rows; a later next_batch reloads (and refuses if the pool changed)."""
        for future in self._pending.values():
            future.cancel()
        for future in self._pending.values():
            if not future.cancelled():
                future.exception()  # wait: a read must not outlive the stream's resources
        self._pending, self._windows, self._orders, self._headed = {}, {}, {}, set()
        self._index = None

    def __enter__(self) -> PromptStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def state_dict(self) -> dict[str, Any]:
        """The cursor, to save with a checkpoint; `pool` identifies the rows it counts."""
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed, "pool": self._digest}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a saved cursor (also on a running stream): the next row is the one after the last given."""
        if state.get("seed") != self.seed:
            raise ValueError(f"saved stream seed {state.get('seed')!r} differs from this stream's seed {self.seed}")
        epoch, position = state.get("epoch"), state.get("position")
        if not (isinstance(epoch, int) and isinstance(position, int) and epoch >= 0 and position >= 0):
            raise ValueError(f"invalid stream state {state!r}: epoch and position must be ints >= 0")
        pool = state.get("pool")
        if pool is not None and pool != self._digest:
            raise ValueError(
                f"{self.path}: saved stream state is for a different prompt pool (or other skip_invalid / "
                "max_prompt_tokens settings): its rows differ, so its cursor would skip or repeat prompts"
            )
        if position > self.rows_per_epoch:
            raise ValueError(
                f"{self.path}: cursor (epoch {epoch}, position {position}) is past the end of the epoch "
                f"({self.rows_per_epoch} rows); the prompt pool changed since the state was saved"
            )
        self.epoch, self.position = (epoch + 1, 0) if position == self.rows_per_epoch else (epoch, position)
        if self._index is not None:
            self._prefetch(self.epoch, self.position, read=False)
