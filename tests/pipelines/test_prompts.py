"""PromptStream over real Ray Data: exact epochs, seeded reshuffles, lossless resume."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray

from drkernel.data.reader import write_rows
from drkernel.data.schema import RowError, parse_row
from pipelines.prompts import PromptStream, order_key

pytestmark = pytest.mark.integration

N = 12


def record(i: int) -> dict:
    return {
        "data_source": "test",
        "prompt": [{"role": "user", "content": f"task {i}"}],
        "ability": "kernel_optimization",
        "reward_model": {"ground_truth": f"# reference {i}\n", "style": "rule"},
        "extra_info": {"entry_point": "Model", "uuid": f"t{i:02d}", "level": 1, "ops": []},
    }


@pytest.fixture(scope="module")
def ray_session():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    path = tmp_path_factory.mktemp("pool") / "pool.parquet"
    write_rows([parse_row(record(i)) for i in range(N)], path)
    return path


def drain(stream: PromptStream) -> list[str]:
    out = []
    while batch := stream.next_batch():
        assert len(batch) <= stream.batch_size
        out += [row.task_uuid for row in batch]
    return out


@pytest.fixture(scope="module")
def uninterrupted(ray_session, pool) -> tuple[list[str], dict, list[str]]:
    """Two epochs, seed 7, batches of 5 (one batch crosses the epoch end), with a mid-epoch snapshot.

    Returns (rows before the snapshot, the snapshot, rows after it); saving the state does not
    disturb the stream, so before + after is the uninterrupted order.
    """
    with PromptStream(pool, batch_size=5, seed=7, num_epochs=2) as stream:
        before = [r.task_uuid for r in stream.next_batch() + stream.next_batch()]
        state = stream.state_dict()
        after = drain(stream)
        assert stream.state_dict() == {"epoch": 2, "position": 0, "seed": 7}
    return before, state, after


def test_every_prompt_once_per_epoch_and_epochs_differ(uninterrupted):
    before, _, after = uninterrupted
    order = before + after
    first, second = order[:N], order[N:]
    expected = sorted(f"t{i:02d}" for i in range(N))
    assert sorted(first) == expected and sorted(second) == expected
    assert first != second
    assert first != expected  # shuffled, not file order


def test_resume_mid_epoch_neither_loses_nor_repeats(ray_session, pool, uninterrupted):
    """A stream rebuilt from the snapshot continues exactly: same order (seeded), no loss, no repeat."""
    before, state, after = uninterrupted
    assert state == {"epoch": 0, "position": 10, "seed": 7}
    with PromptStream(pool, batch_size=5, seed=7, num_epochs=2) as resumed:
        resumed.load_state_dict(state)
        assert drain(resumed) == after


def test_order_depends_on_seed_and_epoch_only():
    rec = record(3)
    assert order_key(7, 0, rec) == order_key(7, 0, dict(reversed(list(rec.items()))))
    assert len({order_key(seed, epoch, rec) for seed in range(5) for epoch in range(5)}) == 25
    assert all(0 <= order_key(s, 0, rec) < 2**63 for s in range(50))


def test_state_must_match_the_stream(ray_session, pool):
    with PromptStream(pool, batch_size=2, seed=1) as stream:
        with pytest.raises(ValueError, match="seed 2 differs"):
            stream.load_state_dict({"epoch": 0, "position": 0, "seed": 2})
        with pytest.raises(ValueError, match="invalid stream state"):
            stream.load_state_dict({"epoch": -1, "position": 0, "seed": 1})
        stream.load_state_dict({"epoch": 0, "position": N + 3, "seed": 1})
        with pytest.raises(ValueError, match="past the end of the epoch"):
            stream.next_batch()


def test_invalid_rows_are_reported_with_the_field(ray_session, tmp_path):
    bad = record(0)
    bad["reward_model"] = {"ground_truth": "", "style": "rule"}
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist([bad]), path)
    with PromptStream(path, batch_size=1) as stream:
        with pytest.raises(RowError, match=r"reward_model\.ground_truth: .*bad\.parquet, epoch 0, position 0"):
            stream.next_batch()


def test_bad_arguments(tmp_path):
    with pytest.raises(FileNotFoundError):
        PromptStream(tmp_path / "none.parquet", batch_size=1)
    with pytest.raises(ValueError, match="batch_size"):
        PromptStream(tmp_path / "none.parquet", batch_size=0)
