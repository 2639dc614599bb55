"""Prompt token lengths: the policy's chat template counted once per (file bytes, tokenizer), then cached."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from drkernel.data.lengths import PromptLengths, percentiles
from drkernel.model.tokenizer import build_tokenizer
from drkernel.sft.data import prompt_ids


def write(path, words: list[int]) -> pa.Table:
    records = [
        {
            "data_source": "t",
            "prompt": [{"role": "user", "content": "kernel " * n}],
            "reward_model": {"ground_truth": "x"},
            "extra_info": {"uuid": f"u{i}"},
        }
        for i, n in enumerate(words)
    ]
    pq.write_table(pa.Table.from_pylist(records), path)
    return pq.read_table(path)


def test_lengths_are_cached_by_file_content_and_tokenizer(tmp_path):
    tokenizer = build_tokenizer(["kernel " * 20, "other words here"], vocab_size=300)
    path = str(tmp_path / "pool.parquet")
    table = write(path, [1, 5, 9, 30])
    valid = np.array([0, 1, 3])  # row 2 did not validate: never tokenized, never reported

    def count(n: int) -> int:
        return len(prompt_ids(tokenizer, [{"role": "user", "content": "kernel " * n}]))

    expected = [count(1), count(5), count(30)]
    first = PromptLengths(tokenizer, tmp_path / "cache")
    assert list(first.for_file(path, table, valid)) == expected and first.computed == 3
    again = PromptLengths(tokenizer, tmp_path / "cache")
    assert list(again.for_file(path, table, valid)) == expected and again.computed == 0
    table = write(path, [2, 5, 9, 30])  # same name and row count, new bytes: counted again
    changed = PromptLengths(tokenizer, tmp_path / "cache")
    assert list(changed.for_file(path, table, valid)) == [count(2), *expected[1:]] and changed.computed == 3
    other = PromptLengths(build_tokenizer(["kernel"], vocab_size=270), tmp_path / "cache")
    assert other.tokenizer_digest != first.tokenizer_digest
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 2


def test_percentiles():
    assert percentiles(np.arange(1, 101)) == {"p50": 51, "p90": 91, "p99": 100, "max": 100}
    assert percentiles(np.zeros(0, np.int64)) == {}
