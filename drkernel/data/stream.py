"""The prompt stream: seeded, resumable, epoch-shuffled batches of validated rows from a prompt pool.

Everything that can fail happens at load: one validation pass over every file (drkernel.data.reader)
and, when a max prompt length is set, the token-length filter (drkernel.data.lengths). Only rows that
passed both enter the order, so a batch never fails half-way and the cursor counts exactly what was
handed out.

The order of an epoch is a permutation of those rows sorted by a 64-bit hash of (seed, epoch, the
row's task uuid), ties broken by file and row. It depends on what the row is, not on how it happens
to be stored (struct or JSON string, one file or eight), and it is an argsort of one int per row:
milliseconds at 72k rows, so an epoch start or a resume does not stall. The next epoch's order is
computed when the current one opens. The cursor (epoch, position) plus the seed is the whole state:
`load_state_dict` continues right after the last delivered row, with no loss and no repeat.

The pool is held as Arrow tables (about the size of the decompressed data); a batch becomes Python
objects only when it is handed out.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

import numpy as np

from drkernel.data.lengths import PromptLengths
from drkernel.data.reader import RowTaker, Scan, scan
from drkernel.data.schema import RowError, TaskRow

_MASK64 = (1 << 64) - 1
_log = logging.getLogger("drkernel.data.stream")


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


class PromptStream:
    """Seeded, resumable, epoch-shuffled batches of TaskRow from a parquet file or folder.

    skip_invalid: drop rows that fail validation (counted in `stats`, listed in `invalid_rows`)
    instead of failing the load. max_prompt_tokens + tokenizer: drop rows whose chat prompt is longer
    than the policy's context budget for it (counted in `stats`; lengths cached, see lengths.py).
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
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if num_epochs is not None and num_epochs < 1:
            raise ValueError(f"num_epochs must be >= 1 or None, got {num_epochs}")
        if max_prompt_tokens is not None and (max_prompt_tokens < 1 or tokenizer is None):
            raise ValueError(f"max_prompt_tokens must be >= 1 and needs a tokenizer, got {max_prompt_tokens}")
        self.path = str(path)
        self.batch_size = batch_size
        self.seed = seed
        self.num_epochs = num_epochs
        self.skip_invalid = skip_invalid
        self.max_prompt_tokens = max_prompt_tokens
        self._lengths = PromptLengths(tokenizer, length_cache_dir) if max_prompt_tokens is not None else None
        self.epoch = 0
        self.position = 0
        self.invalid_rows: list[RowError] = []
        self.stats: dict[str, int] = {}
        self._digest = ""
        self._load()

    def _load(self) -> None:
        """The validation pass and the length filter; fills the row arrays the orders are built from."""
        result: Scan = scan(self.path, self.skip_invalid, keep_tables=True)
        self._takers = [RowTaker(f.table, f.path) for f in result.files]
        file_ids = np.concatenate([np.full(len(f.valid), i, np.int64) for i, f in enumerate(result.files)])
        rows = np.concatenate([f.valid for f in result.files])
        hashes = uuid_hashes([u for f in result.files for u in f.uuids])
        too_long = 0
        if self._lengths is not None:
            lengths = np.concatenate([self._lengths.for_file(f.path, f.table, f.valid) for f in result.files])
            keep = lengths <= self.max_prompt_tokens
            too_long = int((~keep).sum())
            file_ids, rows, hashes = file_ids[keep], rows[keep], hashes[keep]
        if len(rows) == 0:
            raise ValueError(
                f"{self.path}: no rows to train on ({result.num_rows} rows, {result.num_invalid} invalid, "
                f"{too_long} longer than {self.max_prompt_tokens} tokens)"
            )
        digest = hashlib.blake2b(np.sort(hashes).tobytes(), digest_size=16).hexdigest()
        if self._digest and digest != self._digest:
            raise ValueError(f"{self.path}: the prompt pool changed on disk since this stream was opened")
        self._digest = digest
        self._file_ids, self._rows, self._hashes = file_ids, rows, hashes
        self._orders: dict[int, np.ndarray] = {}
        self.invalid_rows = result.errors
        self.stats = {
            "rows": result.num_rows,
            "rows_invalid": result.num_invalid,
            "rows_too_long": too_long,
            "rows_per_epoch": len(rows),
        }
        if result.num_invalid:
            shown = "; ".join(str(e) for e in result.errors[:3])
            _log.warning(
                "%s: skipped %d invalid row(s) of %d: %s", self.path, result.num_invalid, result.num_rows, shown
            )
        if too_long:
            _log.warning(
                "%s: skipped %d row(s) whose prompt is longer than %d tokens",
                self.path,
                too_long,
                self.max_prompt_tokens,
            )

    @property
    def rows_per_epoch(self) -> int:
        return len(self._rows)

    def metrics(self) -> dict[str, float]:
        """The pool's counts for the job's metrics (rows seen, dropped as invalid, dropped as too long)."""
        return {f"data/{key}": float(value) for key, value in self.stats.items()}

    def _order(self, epoch: int) -> np.ndarray:
        """Positions into the row arrays in epoch order; opening an epoch prepares the next one too."""
        for e in (epoch, epoch + 1):
            if e not in self._orders:
                keys = order_keys(self.seed, e, self._hashes)
                self._orders[e] = np.lexsort((self._rows, self._file_ids, keys))
        for stale in [e for e in self._orders if e < epoch]:
            del self._orders[stale]
        return self._orders[epoch]

    def _fetch(self, picks: np.ndarray) -> list[TaskRow]:
        """Rows at these positions, in this order; one Arrow take per file."""
        out: list[TaskRow | None] = [None] * len(picks)
        files = self._file_ids[picks]
        for file_id in np.unique(files):
            where = np.flatnonzero(files == file_id)
            taken = self._takers[file_id].take(self._rows[picks[where]])
            for slot, row in zip(where, taken):
                out[slot] = row
        return out  # type: ignore[return-value]

    def close(self) -> None:
        """Release the pool's memory; a later next_batch reloads it (and refuses if it changed on disk)."""
        self._takers = []
        self._orders = {}

    def __enter__(self) -> PromptStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def next_batch(self) -> list[TaskRow]:
        """Up to batch_size rows (a batch may span two epochs); [] once num_epochs are done.

        The cursor moves only after the whole batch is built, so an exception loses and repeats nothing.
        """
        if self.num_epochs is not None and self.epoch >= self.num_epochs:
            return []
        if not self._takers:
            self._load()
        epoch, position = self.epoch, self.position
        picks: list[np.ndarray] = []
        wanted = self.batch_size
        while wanted and (self.num_epochs is None or epoch < self.num_epochs):
            chunk = self._order(epoch)[position : position + wanted]
            picks.append(chunk)
            wanted -= len(chunk)
            position += len(chunk)
            if position == self.rows_per_epoch:
                epoch, position = epoch + 1, 0
        batch = self._fetch(np.concatenate(picks))
        self.epoch, self.position = epoch, position
        return batch

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
        self._orders = {}
        self.epoch, self.position = (epoch + 1, 0) if position == self.rows_per_epoch else (epoch, position)
