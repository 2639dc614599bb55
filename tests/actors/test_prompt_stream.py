"""PromptStream over real parquet read by Ray Data (the session's cluster): validated at load, exact epochs,
seeded reshuffles, lossless resume."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from actors.prompt_stream import PromptStream
from drkernel.data.index_cache import fingerprint
from drkernel.data.reader import DataFormatError, write_rows
from drkernel.data.stream import order_key
from drkernel.types.task_row import parse_row

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_cluster")]

N = 12


def record(i: int, uuid: str | None = None) -> dict:
    return {
        "data_source": "test",
        "prompt": [{"role": "user", "content": f"task {i} " + "word " * (i % 5) * 40}],
        "ability": "kernel_optimization",
        "reward_model": {"ground_truth": f"# reference {i}\n", "style": "rule"},
        "extra_info": {"entry_point": "Model", "uuid": uuid or f"t{i:02d}", "level": 1, "ops": []},
    }


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    path = tmp_path_factory.mktemp("pool") / "pool.parquet"
    write_rows([parse_row(record(i)) for i in range(N)], path)
    return path


@pytest.fixture(scope="module")
def bad_pool(tmp_path_factory):
    """Two files (struct, then JSON strings) with bad rows in the middle of each."""
    folder = tmp_path_factory.mktemp("bad_pool")
    records = [record(i) for i in range(N)]
    records[2]["reward_model"] = {"ground_truth": "", "style": "rule"}
    records[8]["prompt"] = [{"role": "assistant", "content": "x"}]
    pq.write_table(pa.Table.from_pylist(records[:6]), folder / "0.parquet")
    strings = [{**r, **{c: json.dumps(r[c]) for c in ("prompt", "reward_model", "extra_info")}} for r in records[6:]]
    pq.write_table(pa.Table.from_pylist(strings), folder / "1.parquet")
    return folder


def drain(stream: PromptStream) -> list[str]:
    out = []
    while batch := stream.next_batch():
        assert len(batch) <= stream.batch_size
        out += [row.task_uuid for row in batch]
    return out


def snapshot_run(path, batch_size: int = 5, **kw) -> tuple[list[str], dict, list[str]]:
    """Two epochs (a batch crosses the epoch end), with a snapshot after 2 batches."""
    with PromptStream(path, batch_size=batch_size, seed=7, num_epochs=2, **kw) as stream:
        before = [r.task_uuid for r in stream.next_batch() + stream.next_batch()]
        state = stream.state_dict()
        after = drain(stream)
        assert stream.state_dict()["epoch"] == 2 and stream.state_dict()["position"] == 0
    return before, state, after


def test_every_prompt_once_per_epoch_and_epochs_differ(pool):
    before, _, after = snapshot_run(pool)
    order = before + after
    first, second = order[:N], order[N:]
    expected = sorted(f"t{i:02d}" for i in range(N))
    assert sorted(first) == expected and sorted(second) == expected
    assert first != second
    assert first != expected  # shuffled, not file order


def test_resume_mid_epoch_neither_loses_nor_repeats(pool):
    """A rebuilt stream and a running one that moved on both continue exactly after the snapshot."""
    _, state, after = snapshot_run(pool)
    assert (state["epoch"], state["position"], state["seed"]) == (0, 10, 7)
    with PromptStream(pool, batch_size=5, seed=7, num_epochs=2) as resumed:
        resumed.load_state_dict(state)
        assert drain(resumed) == after
    with PromptStream(pool, batch_size=3, seed=7, num_epochs=2) as running:
        running.next_batch()
        running.next_batch()
        running.load_state_dict(state)  # mid-stream: what it had prepared must not leak into the next batches
        assert drain(running) == after


def test_rewind_in_one_process_neither_loses_nor_repeats(pool):
    """The same stream rewound (a failed step retried) after it moved on, ran out, or was closed, replays
    exactly what followed the snapshot, every time."""
    _, state, after = snapshot_run(pool)
    with PromptStream(pool, batch_size=5, seed=7, num_epochs=2) as stream:
        stream.next_batch()
        stream.load_state_dict(state)
        assert [r.task_uuid for r in stream.next_batch()] == after[:5]  # forward, then back 5 rows
        stream.load_state_dict(state)
        assert drain(stream) == after  # across the epoch end to the last epoch
        assert stream.next_batch() == []
        stream.load_state_dict(state)
        assert drain(stream) == after  # after running out
        stream.close()
        stream.load_state_dict(state)
        assert drain(stream) == after  # after closing


def test_bad_rows_fail_at_load_naming_file_row_and_uuid(bad_pool):
    """Strict by default: nothing is streamed from a pool with a bad row, and the error says where it is."""
    with pytest.raises(DataFormatError) as info:
        PromptStream(bad_pool, batch_size=4)
    assert [(e.file, e.index, e.uuid, e.field) for e in info.value.errors] == [
        (str(bad_pool / "0.parquet"), 2, "t02", "reward_model.ground_truth"),
        (str(bad_pool / "1.parquet"), 2, "t08", "prompt"),
    ]


def test_resume_after_skipped_bad_rows_neither_loses_nor_repeats(bad_pool):
    good = sorted(f"t{i:02d}" for i in range(N) if i not in (2, 8))
    before, state, after = snapshot_run(bad_pool, batch_size=3, skip_invalid=True)
    order = before + after
    assert sorted(order[:10]) == good and sorted(order[10:]) == good  # bad rows never enter the order
    assert (state["epoch"], state["position"]) == (0, 6)  # the cursor counts exactly what was handed out
    with PromptStream(bad_pool, batch_size=4, seed=7, num_epochs=2, skip_invalid=True) as resumed:
        resumed.load_state_dict(state)
        assert drain(resumed) == after
        assert resumed.metrics() == {
            "data/rows": 12.0,
            "data/rows_invalid": 2.0,
            "data/rows_too_long": 0.0,
            "data/rows_per_epoch": 10.0,
        }
        assert [e.uuid for e in resumed.invalid_rows] == ["t02", "t08"]


def test_order_follows_the_uuid_not_the_storage(pool, tmp_path):
    """The same tasks stored as two JSON-string files in reverse give the same epoch orders."""
    records = [record(i) for i in reversed(range(N))]
    strings = [{**r, "prompt": json.dumps(r["prompt"]), "extra_info": json.dumps(r["extra_info"])} for r in records]
    pq.write_table(pa.Table.from_pylist(strings[:5]), tmp_path / "a.parquet")
    pq.write_table(pa.Table.from_pylist(strings[5:]), tmp_path / "b.parquet")
    with PromptStream(pool, batch_size=N, seed=3) as one, PromptStream(tmp_path, batch_size=N, seed=3) as two:
        for _ in range(2):
            assert [r.task_uuid for r in one.next_batch()] == [r.task_uuid for r in two.next_batch()]


def test_order_key_depends_on_seed_epoch_and_uuid_only():
    assert order_key(7, 0, "t03") == order_key(7, 0, "t03")
    assert len({order_key(seed, epoch, "t03") for seed in range(5) for epoch in range(5)}) == 25
    assert order_key(7, 0, "t03") != order_key(7, 0, "t04")
    assert all(0 <= order_key(s, 0, "t03") < 2**64 for s in range(50))


def test_close_then_continue_and_a_changed_pool_is_refused(tmp_path):
    path = tmp_path / "pool.parquet"
    write_rows([parse_row(record(i)) for i in range(N)], path)
    with PromptStream(path, batch_size=4, seed=1, num_epochs=1) as stream:
        first = [r.task_uuid for r in stream.next_batch()]
        stream.close()  # memory released; the next batch reloads and goes on from the cursor
        rest = drain(stream)
    assert sorted(first + rest) == sorted(f"t{i:02d}" for i in range(N))
    with PromptStream(path, batch_size=4, seed=1) as stream:
        state = stream.state_dict()
        stream.close()
        write_rows([parse_row(record(i)) for i in range(N + 1)], path)
        with pytest.raises(ValueError, match="changed on disk"):
            stream.next_batch()
    with PromptStream(path, batch_size=4, seed=1) as other, pytest.raises(ValueError, match="different prompt pool"):
        other.load_state_dict(state)


def test_state_must_match_the_stream(pool):
    with PromptStream(pool, batch_size=2, seed=1) as stream:
        with pytest.raises(ValueError, match="seed 2 differs"):
            stream.load_state_dict({"epoch": 0, "position": 0, "seed": 2})
        with pytest.raises(ValueError, match="invalid stream state"):
            stream.load_state_dict({"epoch": -1, "position": 0, "seed": 1})
        with pytest.raises(ValueError, match="past the end of the epoch"):
            stream.load_state_dict({"epoch": 0, "position": N + 3, "seed": 1})
        stream.load_state_dict({"epoch": 0, "position": N, "seed": 1})  # the end of epoch 0 = the start of 1
        assert stream.state_dict()["epoch"] == 1 and stream.state_dict()["position"] == 0


def test_long_prompts_are_filtered_and_counted(pool, tmp_path):
    """Lengths come from the tokenizer's chat template, once: a second stream reads them from the cache."""
    from drkernel.model.tokenizer import build_tokenizer
    from drkernel.sft.data import prompt_ids

    tokenizer = build_tokenizer([f"task {i} " + "word " * 50 for i in range(20)], vocab_size=300)
    lengths = {f"t{i:02d}": len(prompt_ids(tokenizer, record(i)["prompt"])) for i in range(N)}
    limit = sorted(lengths.values())[N // 2]
    kept = sorted(u for u, n in lengths.items() if n <= limit)
    for _ in range(2):
        with PromptStream(
            pool, batch_size=N, num_epochs=1, max_prompt_tokens=limit, tokenizer=tokenizer, length_cache_dir=tmp_path
        ) as stream:
            assert sorted(drain(stream)) == kept
            assert stream.metrics()["data/rows_too_long"] == N - len(kept) > 0
    assert len(list(tmp_path.glob("*.npy"))) == 1
    with pytest.raises(ValueError, match="needs a tokenizer"):
        PromptStream(pool, batch_size=1, max_prompt_tokens=10)


def test_bad_arguments(tmp_path):
    with pytest.raises(FileNotFoundError, match="prompt file or folder not found"):
        PromptStream(tmp_path / "none.parquet", batch_size=1)
    with pytest.raises(ValueError, match="batch_size"):
        PromptStream(tmp_path / "none.parquet", batch_size=0)
    with pytest.raises(ValueError, match="tasks_per_cpu must be > 0"):
        PromptStream(tmp_path / "none.parquet", batch_size=1, tasks_per_cpu=0)


def test_small_windows_and_cold_cursors_hand_out_the_same_stream(pool):
    """Windows of 4 rows read ahead of the cursor (batches crossing windows and the epoch end), and resumes
    that land cold inside a window, hand out exactly what one window over the whole pool does."""
    before, state, after = snapshot_run(pool)
    with PromptStream(pool, batch_size=5, seed=7, num_epochs=2, window_rows=4, head_rows=1) as small:
        assert drain(small) == before + after
        small.load_state_dict(state)
        assert drain(small) == after
        small.load_state_dict({**state, "position": 3})
        assert drain(small) == (before + after)[3:]


def test_reads_cut_into_interleaved_tasks_hand_out_what_one_row_group_does(tmp_path):
    """48 row groups of one row (struct, then JSON-string storage) read as several tasks, each with groups of
    both files, or as at most one task a CPU: the stream is the one the same rows give from one row group."""
    records = [record(i) for i in range(48)]
    write_rows([parse_row(r) for r in records], tmp_path / "one.parquet")
    folder = tmp_path / "many"
    folder.mkdir()
    pq.write_table(pa.Table.from_pylist(records[:24]), folder / "0.parquet", row_group_size=1)
    strings = [{**r, **{c: json.dumps(r[c]) for c in ("prompt", "reward_model", "extra_info")}} for r in records[24:]]
    pq.write_table(pa.Table.from_pylist(strings), folder / "1.parquet", row_group_size=1)
    options = {"batch_size": 5, "seed": 3, "num_epochs": 2, "window_rows": 20, "index_cache_dir": tmp_path / "c"}
    with PromptStream(tmp_path / "one.parquet", **options) as one:
        want = drain(one)
    assert sorted(want[:48]) == sorted(want[48:]) == sorted(r["extra_info"]["uuid"] for r in records)
    for per_cpu in (4, 1):
        shutil.rmtree(tmp_path / "c")  # validate every row group again, in this many tasks
        with PromptStream(folder, tasks_per_cpu=per_cpu, **options) as many:
            assert drain(many) == want


def test_a_second_load_reads_the_verdicts_back_and_a_rewritten_file_is_validated_again(bad_pool, tmp_path):
    """The first load keeps each file's verdict; the next takes it from there (bad rows still named), without
    reading the file's rows; a file touched since is validated again."""
    cache = tmp_path / "verdicts"
    for _ in range(2):
        with pytest.raises(DataFormatError) as info:
            PromptStream(bad_pool, batch_size=4, index_cache_dir=cache)
        assert [(e.file, e.index, e.uuid, e.field) for e in info.value.errors] == [
            (str(bad_pool / "0.parquet"), 2, "t02", "reward_model.ground_truth"),
            (str(bad_pool / "1.parquet"), 2, "t08", "prompt"),
        ]
    assert len(list(cache.glob("*.npz"))) == 2
    # A verdict the pass would never give (row 0 of the first file left out) is what the next load goes by.
    first = cache / f"{fingerprint(bad_pool / '0.parquet')}.npz"
    with np.load(first) as data:
        entry = {k: data[k] for k in data.files}
    np.savez(first, **{**entry, "rows": entry["rows"][1:], "hashes": entry["hashes"][1:]})
    with PromptStream(bad_pool, batch_size=N, num_epochs=1, skip_invalid=True, index_cache_dir=cache) as stream:
        assert sorted(drain(stream)) == sorted(f"t{i:02d}" for i in range(1, N) if i not in (2, 8))
    os.utime(bad_pool / "0.parquet")  # touched: a new fingerprint, so the file is validated again
    with PromptStream(bad_pool, batch_size=N, num_epochs=1, skip_invalid=True, index_cache_dir=cache) as stream:
        assert sorted(drain(stream)) == sorted(f"t{i:02d}" for i in range(N) if i not in (2, 8))
