"""Prompt lengths in tokens of the policy's tokenizer, computed once per (file, tokenizer) and cached.

Tokenizing 72k prompts of several KB takes far longer than validating them, and the answer only
changes when the file or the tokenizer does. So lengths are stored in a small .npy file named by a
digest of the file's bytes and a digest of the tokenizer (vocabulary, merges, chat template):
`drkernel prepare-data --check --tokenizer` fills the cache, and the prompt stream's length filter
reads it. A prompt's length is that of its chat template with the generation prompt, exactly what the
policy is fed (drkernel.sft.data.prompt_ids does the same).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from drkernel.data.reader import RowTaker

_CHUNK_ROWS = 512  # prompts rendered and tokenized together
_READ_BYTES = 4 << 20


def default_cache_dir() -> Path:
    """$DRKERNEL_CACHE_DIR/prompt_lengths, else ~/.cache/drkernel/prompt_lengths."""
    root = os.environ.get("DRKERNEL_CACHE_DIR") or Path.home() / ".cache" / "drkernel"
    return Path(root) / "prompt_lengths"


def file_digest(path: str | Path) -> str:
    """Digest of a file's bytes: a rewritten file gets new lengths even when its name and size stay."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while chunk := f.read(_READ_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def tokenizer_digest(tokenizer: Any) -> str:
    """Digest of what decides a prompt's token count: the tokenizer model and the chat template."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    body = backend.to_str() if backend is not None else json.dumps(sorted(tokenizer.get_vocab().items()))
    template = json.dumps(getattr(tokenizer, "chat_template", None))
    return hashlib.blake2b(f"{type(tokenizer).__name__}\n{template}\n{body}".encode(), digest_size=16).hexdigest()


def count_tokens(tokenizer: Any, prompts: Sequence[list[dict[str, Any]]]) -> list[int]:
    """Token count of each chat prompt as the policy sees it (template + generation prompt)."""
    texts = [tokenizer.apply_chat_template(list(p), add_generation_prompt=True, tokenize=False) for p in prompts]
    encoded = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return [len(ids) for ids in encoded]


class PromptLengths:
    """Token lengths of a file's valid rows for one tokenizer, through the on-disk cache."""

    def __init__(self, tokenizer: Any, cache_dir: str | Path | None = None):
        self.tokenizer = tokenizer
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.tokenizer_digest = tokenizer_digest(tokenizer)
        self.computed = 0  # rows tokenized by this object (0 when everything came from the cache)

    def cache_path(self, file: str | Path) -> Path:
        return self.cache_dir / f"{file_digest(file)}-{self.tokenizer_digest}.npy"

    def cached(self, file: str | Path) -> tuple[Path, np.ndarray | None]:
        """The cache path of a file's lengths and, when present, every row's cached length (-1 = not computed)."""
        path = self.cache_path(file)
        try:
            return path, np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            return path, None

    def store(self, path: Path, lengths: np.ndarray, computed: int) -> None:
        """Save a file's lengths at its cache path; `computed` of them were tokenized now."""
        _store(path, lengths)
        self.computed += computed

    def for_file(self, file: str, table: pa.Table, valid: np.ndarray) -> np.ndarray:
        """int64 lengths of the rows at `valid` (row indices of the validated rows of `file`)."""
        cached = self.cache_path(file)
        lengths = _load(cached, table.num_rows)
        missing = valid[lengths[valid] < 0] if len(valid) else valid
        if len(missing):
            taker = RowTaker(table, file)
            for start in range(0, len(missing), _CHUNK_ROWS):
                chunk = missing[start : start + _CHUNK_ROWS]
                rows = taker.take(chunk)
                messages = [[m.model_dump(mode="json") for m in row.prompt] for row in rows]
                lengths[chunk] = count_tokens(self.tokenizer, messages)
            self.computed += len(missing)
            _store(cached, lengths)
        return lengths[valid]


def _load(path: Path, num_rows: int) -> np.ndarray:
    """Cached lengths of every row (-1 = not computed); a missing or mismatched cache counts as empty."""
    try:
        lengths = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return np.full(num_rows, -1, np.int64)
    if lengths.shape != (num_rows,) or lengths.dtype != np.int64:
        return np.full(num_rows, -1, np.int64)
    return lengths


def _store(path: Path, lengths: np.ndarray) -> None:
    """Write atomically: a reader never sees half a file, and concurrent writers agree on the content."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, lengths, allow_pickle=False)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def percentiles(lengths: np.ndarray, points: Sequence[float] = (50, 90, 99)) -> dict[str, int]:
    """p50/p90/p99/max of token lengths, as ints (empty input -> empty dict)."""
    if len(lengths) == 0:
        return {}
    out = {f"p{p:g}": int(np.percentile(lengths, p, method="higher")) for p in points}
    out["max"] = int(lengths.max())
    return out
