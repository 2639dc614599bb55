"""The prompt source actor's memory does not grow with the pool: it holds a key index and windows of rows,
while Ray Data tasks do the reading."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray

from actors.prompt_source import PromptSource

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
        source = PromptSource.remote(str(write_big_pool(tmp_path / f"pool{n}.parquet", n)), 0, 1, {"window_rows": 200})
        uuids = [ray.get(source.next_group.remote("w", 0)).task.task_uuid for _ in range(250)]
        assert len(set(uuids)) == 250
        peaks[n] = peak_rss_mb(source)
        ray.kill(source)
    extra_rows_mb = 7_000 * ROW_BYTES / 2**20
    assert peaks[8_000] - peaks[1_000] < extra_rows_mb / 3, (peaks, extra_rows_mb)
