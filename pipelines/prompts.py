"""The prompt stream: Ray Data reads the parquet pool and hands rollout workers validated batches.

Each epoch visits every row once, in an order fixed by (seed, epoch): rows are sorted by a hash of
the seed, the epoch and the row's content, so the order does not depend on how Ray splits the file
into blocks and a rebuilt stream reproduces it exactly. The cursor (epoch, position) counts rows
handed out; `state_dict()` saved with a checkpoint and `load_state_dict()` on resume continue right
after the last delivered row, so no prompt is lost or repeated. Prompts that were delivered but
whose rollouts were not yet trained are the caller's to track (the trajectory queue's state).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset
import ray

from drkernel.data.schema import RowError, TaskRow, parse_row

_ORDER_COLUMN = "__drkernel_order"
_KEY_SPACE = 1 << 63
_ROWS_PER_PARTITION = 2048  # sort partitions of the epoch shuffle: enough to stream, few for small files
_MAX_PARTITIONS = 64


def order_key(seed: int, epoch: int, record: dict[str, Any]) -> int:
    """Sort key of one row in one epoch: a 63-bit hash of seed, epoch and the row's content."""
    content = json.dumps(record, sort_keys=True, default=str)
    digest = hashlib.blake2b(f"{seed}:{epoch}:{content}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


class PromptStream:
    """Seeded, resumable, epoch-shuffled batches of TaskRow from a parquet prompt pool."""

    def __init__(self, path: str | Path, batch_size: int, seed: int = 0, num_epochs: int | None = None):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if num_epochs is not None and num_epochs < 1:
            raise ValueError(f"num_epochs must be >= 1 or None, got {num_epochs}")
        self.path = str(path)
        if not Path(self.path).exists():
            raise FileNotFoundError(f"prompt file not found: {self.path}")
        self.batch_size = batch_size
        self.seed = seed
        self.num_epochs = num_epochs
        self.epoch = 0
        self.position = 0
        self._dataset = ray.data.read_parquet(self.path)
        self._rows: Iterator[dict[str, Any]] | None = None
        num_rows = pyarrow.dataset.dataset(self.path, format="parquet").count_rows()  # metadata only
        if num_rows == 0:
            raise ValueError(f"{self.path}: the prompt file has no rows")
        partitions = min(max(num_rows // _ROWS_PER_PARTITION, 2), _MAX_PARTITIONS)
        # Keys are uniform hashes, so even boundaries split the rows evenly with no sampling pass.
        self._boundaries = [_KEY_SPACE * i // partitions for i in range(1, partitions)]

    def _epoch_rows(self, epoch: int) -> Iterator[dict[str, Any]]:
        seed = self.seed

        def add_order(batch: pa.Table) -> pa.Table:
            keys = [order_key(seed, epoch, record) for record in batch.to_pylist()]
            return batch.append_column(_ORDER_COLUMN, pa.array(keys, pa.int64()))

        ordered = self._dataset.map_batches(add_order, batch_format="pyarrow").sort(
            _ORDER_COLUMN, boundaries=self._boundaries
        )
        return iter(ordered.drop_columns([_ORDER_COLUMN]).iter_rows())

    def close(self) -> None:
        """Stop the running epoch's Ray Data execution; call before ray.shutdown()."""
        if self._rows is not None:
            close = getattr(self._rows, "close", None)
            if close is not None:
                close()
            self._rows = None

    def __enter__(self) -> PromptStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open_epoch(self) -> Iterator[dict[str, Any]]:
        rows = self._epoch_rows(self.epoch)
        for skipped in range(self.position):
            if next(rows, None) is None:
                raise ValueError(
                    f"{self.path}: cursor (epoch {self.epoch}, position {self.position}) is past the end "
                    f"of the epoch ({skipped} rows); the prompt file changed since the state was saved"
                )
        return rows

    def next_batch(self) -> list[TaskRow]:
        """Up to batch_size rows (a batch may span two epochs); [] once num_epochs are done."""
        batch: list[TaskRow] = []
        while len(batch) < self.batch_size:
            if self.num_epochs is not None and self.epoch >= self.num_epochs:
                break
            if self._rows is None:
                self._rows = self._open_epoch()
            raw = next(self._rows, None)
            if raw is None:
                if self.position == 0:
                    raise ValueError(f"{self.path}: the prompt file has no rows")
                self.close()
                self.epoch, self.position = self.epoch + 1, 0
                continue
            try:
                batch.append(parse_row(raw, self.position))
            except RowError as e:
                where = f"{self.path}, epoch {self.epoch}, position {self.position}"
                raise RowError(None, e.field, f"{e.message} ({where})") from None
            self.position += 1
        return batch

    def state_dict(self) -> dict[str, Any]:
        """The cursor, to save with a checkpoint."""
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a saved cursor; the seed must match or the order (and the cursor) would differ."""
        if state.get("seed") != self.seed:
            raise ValueError(f"saved stream seed {state.get('seed')!r} differs from this stream's seed {self.seed}")
        epoch, position = state.get("epoch"), state.get("position")
        if not (isinstance(epoch, int) and isinstance(position, int) and epoch >= 0 and position >= 0):
            raise ValueError(f"invalid stream state {state!r}: epoch and position must be ints >= 0")
        self.close()
        self.epoch, self.position = epoch, position
