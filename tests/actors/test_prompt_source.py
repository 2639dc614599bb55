"""The prompt source actor's memory does not grow with the pool: it holds a key index and windows of rows,
while Ray Data tasks do the reading."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray

from actors.prompt_source import PromptSource, PromptSourceOptions

pytestmark = pytest.mark.integration

ROW_BYTES = 8000


def write_big_pool(path: Path, n: int) -> Path:
    rows = [
        {
            "data_source": "test",
            "prompt": [{"role": "user", "content": f"task {i} " + "x" * ROW_BYTES}],
            "reward_model": {"ground_truth": f"# reference {i}\n", "style": "rule"},
            "extra_info": {"entry_point": "Model", "uuid": f"big{i:06d}"},
        }
        for i in range(n)
    ]
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=500)
    return path


def peak_rss_mb(actor) -> float:
    pid = ray.get(actor.__ray_call__.remote(lambda _self: os.getpid()))
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(status["VmHWM"].split()[0]) / 1024


def test_actor_memory_does_not_grow_with_the_pool(ray_cluster, tmp_path):
    """A pool 8x larger (53 MB more rows than the small one) leaves the actor's peak RSS where it was."""
    peaks = {}
    for n in (1_000, 8_000):
        source = PromptSource.remote(
            str(write_big_pool(tmp_path / f"pool{n}.parquet", n)), 0, 1, PromptSourceOptions(window_rows=200)
        )
        uuids = [ray.get(source.next_group.remote("w", 0)).task.task_uuid for _ in range(250)]
        assert len(set(uuids)) == 250
        peaks[n] = peak_rss_mb(source)
        ray.kill(source)
    extra_rows_mb = 7_000 * ROW_BYTES / 2**20
    assert peaks[8_000] - peaks[1_000] < extra_rows_mb / 3, (peaks, extra_rows_mb)


def test_options_are_typed_and_unknown_keys_refused():
    from pydantic import ValidationError

    assert PromptSourceOptions(window_rows=200).window_rows == 200
    with pytest.raises(ValidationError, match="window_row"):
        PromptSourceOptions(window_row=200)  # a misspelt key is an error, not a silent default
    with pytest.raises(ValidationError, match="needs tokenizer_path"):
        PromptSourceOptions(max_prompt_tokens=10)
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        PromptSourceOptions(window_rows=0)


def test_the_source_loads_its_tokenizer_and_drops_long_prompts(ray_cluster, tmp_path):
    """tokenizer_path: the actor loads the policy's tokenizer itself and the stream's length filter uses it."""
    from drkernel.model.tokenizer import build_tokenizer

    tokenizer = build_tokenizer(["task short long " + "word " * 20] * 4, vocab_size=300)
    tokenizer.save_pretrained(tmp_path / "tok")
    rows = [
        {
            "data_source": "test",
            "prompt": [{"role": "user", "content": "task short" if i % 2 else "task long " + "word " * 200}],
            "reward_model": {"ground_truth": f"# reference {i}\n", "style": "rule"},
            "extra_info": {"entry_point": "Model", "uuid": f"{'short' if i % 2 else 'long'}{i}"},
        }
        for i in range(4)
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "pool.parquet")
    options = PromptSourceOptions(
        max_prompt_tokens=100, tokenizer_path=str(tmp_path / "tok"), length_cache_dir=str(tmp_path / "lengths")
    )
    source = PromptSource.remote(str(tmp_path / "pool.parquet"), 0, 1, options)
    uuids = []
    while (group := ray.get(source.next_group.remote("w", 0))) is not None:
        uuids.append(group.task.task_uuid)
    assert sorted(uuids) == ["short1", "short3"]
    with pytest.raises(ray.exceptions.RayActorError, match="PromptSourceOptions"):
        ray.get(PromptSource.remote(str(tmp_path / "pool.parquet"), 0, 1, {"window_rows": 200}).stats.remote())
    ray.kill(source)
