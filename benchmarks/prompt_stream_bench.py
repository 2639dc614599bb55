"""The Ray Data prompt stream at the dataset's scale: the prompt actor's memory, first group, steady rate,
epoch switch and resume, for pools of 72k and 1M rows shaped like hkust-nlp/drkernel-rl-data.

The pools are written by this script (benchmarks/prompt_data_bench.py's rows: several KB each, a few broken,
files alternating struct and JSON-string storage) into --out, never into the repository. Each pool is
streamed by a real PromptSource actor on a private Ray cluster (the one this script starts); its peak RSS
is read from /proc (VmHWM) after every phase.

    python benchmarks/prompt_stream_bench.py --make 72000 1000000          # write the pools (minutes)
    python benchmarks/prompt_stream_bench.py --rows 72000 1000000          # measure them
    python benchmarks/prompt_stream_bench.py --cpu 1000000                 # CPU seconds of the index pass
    python benchmarks/prompt_stream_bench.py --compare 1000000 --repeat 2  # cold first group, before vs now
    python benchmarks/prompt_stream_bench.py --make 5000 --rows 5000       # a smoke run
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from prompt_data_bench import write_pool  # noqa: E402

ROWS_PER_FILE = 62_500  # 1M rows = 16 files, about 75 MB of parquet each


def pool_dir(out: Path, rows: int) -> Path:
    return out / f"pool-{rows}"


def make(out: Path, rows: int) -> None:
    folder = pool_dir(out, rows)
    if folder.is_dir() and any(folder.glob("*.parquet")):
        print(f"{folder}: exists", flush=True)
        return
    files = max(1, -(-rows // ROWS_PER_FILE))
    t = time.perf_counter()
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        _, size = pool.submit(write_pool, folder, rows, files).result()
    print(f"{folder}: {rows} rows in {files} files, {size / 2**20:.0f} MB, {time.perf_counter() - t:.0f}s", flush=True)


def peak_rss_mb(pid: int) -> tuple[float, float]:
    """(peak, current) resident memory of a process on this host, from /proc."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmHWM"].split()[0]) / 1024, int(fields["VmRSS"].split()[0]) / 1024


def _load() -> float:
    """The host's 1-minute load average: the box is shared, so every figure is printed beside it."""
    return round(os.getloadavg()[0], 1)


def _window_ready(source) -> None:
    """Block until the actor's background window reads are done (the actor runs one call at a time)."""
    import ray

    ray.get(source.__ray_call__.remote(lambda self: [f.result() for f in list(self._stream._pending.values())]))


class _Empty:
    def ping(self) -> None:
        """Nothing: the actor's start is what is timed."""


def _time_window_read(actor) -> float:
    stream = actor._stream
    first, stop = (int(x) for x in stream._window_starts()[1:3])
    t = time.perf_counter()
    stream._read(0, first, stop)
    return time.perf_counter() - t


def measure(path: Path, steady: int, window_rows: int, cache_dir: Path) -> dict[str, float]:
    import ray

    from actors.prompt_source import PromptSource, PromptSourceOptions

    options = PromptSourceOptions(skip_invalid=True, window_rows=window_rows, index_cache_dir=str(cache_dir))
    out: dict[str, float] = {"load_start": _load()}
    shutil.rmtree(cache_dir, ignore_errors=True)  # cold: the index pass validates every row
    t = time.perf_counter()
    source = PromptSource.remote(str(path), 1, None, options)
    ray.get(source.next_group.remote("w", 0))
    out["first_group_cold_s"] = time.perf_counter() - t  # start the actor (the index pass), then the first group
    _window_ready(source)
    out["first_window_ready_s"] = time.perf_counter() - t  # the whole window at the cursor held
    out["load_after_cold"] = _load()
    pid = ray.get(source.__ray_call__.remote(lambda _self: os.getpid()))
    metrics = ray.get(source.metrics.remote())
    n = metrics["data/rows_per_epoch"]
    out["rows_per_epoch"], out["rows_invalid"] = n, metrics["data/rows_invalid"]

    t = time.perf_counter()
    for _ in range(steady):
        ray.get(source.next_group.remote("w", 0))
    out["steady_groups_per_s"] = steady / (time.perf_counter() - t)  # from the window held, no read waited for

    def pull(k: int) -> list[float]:
        times = []
        for _ in range(k):
            t0 = time.perf_counter()
            ray.get(source.next_group.remote("w", 0))
            times.append(time.perf_counter() - t0)
        return times

    # A whole window read (the next one, prefetched while the first was handed out): it must take less time
    # than handing out a window at the target rate (window_rows / 100 s) for the stream never to wait.
    t = time.perf_counter()
    _window_ready(source)
    out["next_window_wait_s"] = time.perf_counter() - t

    # One whole window read (the second of epoch 0), timed alone: the stream never waits while this is shorter
    # than handing out a window at the target rate (window_rows / 100 groups/s).
    out["window_read_s"] = ray.get(source.__ray_call__.remote(_time_window_read))

    # Resume on the running actor: a cursor far from anything read, then the next group.
    state = ray.get(source.state_dict.remote())
    state["stream"]["position"] = int(n) // 2 + 123
    state["outstanding"] = []
    t = time.perf_counter()
    ray.get(source.load_state_dict.remote(state))
    ray.get(source.next_group.remote("w", 0))
    out["resume_s"] = time.perf_counter() - t

    # Epoch switch: resume 2,000 rows before the end, let its window arrive, pull across the end at full speed.
    before_end = min(int(n), 2000)
    state["stream"]["position"] = int(n) - before_end
    ray.get(source.load_state_dict.remote(state))
    ray.get(source.next_group.remote("w", 0))
    _window_ready(source)
    times = pull(before_end + 64)
    out["epoch_switch_s"] = times[before_end - 1]
    out["slowest_pull_after_window_s"] = max(times)
    out["median_pull_ms"] = float(np.median(times)) * 1e3
    assert ray.get(source.stats.remote())["cursor"]["epoch"] == 1
    out["actor_peak_rss_mb"], out["actor_rss_end_mb"] = peak_rss_mb(pid)
    ray.kill(source)

    # A second job on the same pool (or a restarted prompt actor): the verdicts come from the cache. Beside it,
    # what starting an actor that does nothing costs at this moment's load.
    out["load_before_warm"] = _load()
    t = time.perf_counter()
    empty = ray.remote(num_cpus=0)(_Empty).remote()
    ray.get(empty.ping.remote())
    out["empty_actor_start_s"] = time.perf_counter() - t
    ray.kill(empty)
    t = time.perf_counter()
    source = PromptSource.remote(str(path), 1, None, options)
    ray.get(source.next_group.remote("w", 0))
    out["first_group_warm_s"] = time.perf_counter() - t
    ray.kill(source)
    out["load_end"] = _load()
    return out


def cold_compare(path: Path, repeat: int, window_rows: int, cache_dir: Path) -> dict[str, float]:
    """The cold first group (nothing cached: actor start, index pass, first rows) with the read tasks of before
    (one per 8 row groups: tasks_per_cpu large enough not to bind) and of now (a few a CPU), alternated in one
    run so both meet the same host load (before, now, now, before, ...), after one untimed cold start that starts
    the Ray Data worker processes (so neither side pays for that: a job's first cold start does, see --rows);
    medians and the ratio before / now, of the wall time and of the cluster's CPU seconds (which the host's load
    moves far less)."""
    import ray

    from actors.prompt_source import PromptSource, PromptSourceOptions

    times: dict[str, list[float]] = {"before": [], "now": []}
    cpus: dict[str, list[float]] = {"before": [], "now": []}
    plans = {"before": {"tasks_per_cpu": 10**6}, "now": {}}
    pairs = [("before", "now")[:: 1 - 2 * (i % 2)] for i in range(repeat)]
    runs = [("warm-up", "now")] + [(name, name) for pair in pairs for name in pair]
    for name, plan in runs:
        shutil.rmtree(cache_dir, ignore_errors=True)
        options = PromptSourceOptions(
            skip_invalid=True, window_rows=window_rows, index_cache_dir=str(cache_dir), **plans[plan]
        )
        cpu, t = cluster_cpu_s(), time.perf_counter()
        source = PromptSource.remote(str(path), 1, None, options)
        ray.get(source.next_group.remote("w", 0))
        times.setdefault(name, []).append(time.perf_counter() - t)
        cpus.setdefault(name, []).append(cluster_cpu_s() - cpu)
        ray.kill(source)
    out = {f"cold_first_group_{name}_s": float(np.median(times[name])) for name in ("before", "now")}
    out |= {f"cluster_cpu_{name}_s": float(np.median(cpus[name])) for name in ("before", "now")}
    out["before_over_now"] = out["cold_first_group_before_s"] / out["cold_first_group_now_s"]
    out["cpu_before_over_now"] = out["cluster_cpu_before_s"] / out["cluster_cpu_now_s"]
    return {**out, **{f"{name}_{i}_s": x for name, v in times.items() if name != "warm-up" for i, x in enumerate(v)}}


def cluster_cpu_s() -> float:
    """CPU seconds so far of this process and every process it started: the private Ray cluster's GCS, raylet
    and workers (the prompt actor, the Ray Data tasks). Ended processes are not counted, so the ones that
    run a cold start (the prompt actor and its tasks' workers) are killed only after it is read."""
    import psutil

    total = 0.0
    for proc in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def cpu_seconds(path: Path, every: int, window_rows: int) -> dict[str, float]:
    """CPU seconds (this process's, which the host's load moves far less than wall time) of the index pass's
    work on every `every`-th row group, scaled to the whole pool: what the pass and one window read cost the
    cluster's CPUs, Ray Data's own task overhead not included. Beside it, on the same row groups, the pass
    before the Arrow check (pydantic over every row of the whole row group)."""
    from actors.prompt_stream import _index_pieces, _read_pieces
    from drkernel.data.stream import check_rows, pool_files, read_row_group

    files, _ = pool_files(path)
    groups = [(i, g, int(f.starts[g])) for i, f in enumerate(files) for g in range(len(f.starts) - 1)]
    sample = groups[::every]
    batch = {k: np.asarray([x[j] for x in sample]) for j, k in enumerate(("file_id", "row_group", "first_row"))}
    paths = [f.path for f in files]
    warm = {k: v[:1] for k, v in batch.items()}  # first calls (imports, kernel registries) timed in neither
    _index_pieces(warm, paths)
    check_rows(read_row_group(paths[sample[0][0]], sample[0][1]), paths[sample[0][0]], sample[0][2], prompts=False)
    t = time.process_time()
    for file_id, group, first in sample:
        check_rows(read_row_group(paths[file_id], group), paths[file_id], first, prompts=False)
    pydantic_cpu = time.process_time() - t
    t = time.process_time()
    rows = len(_index_pieces(batch, paths)["row"])
    cpu = time.process_time() - t
    # A window read: each row group gives its share of a window's rows (window_rows spread over every group).
    share = -(-min(window_rows, rows * len(groups) // len(sample)) // len(groups))
    batch["local"] = np.empty(len(sample), object)
    batch["local"][:] = [list(range(share))] * len(sample)
    batch["positions"] = batch["local"]
    t = time.process_time()
    _read_pieces(batch, paths)
    window_cpu = time.process_time() - t
    return {
        "sampled_rows": rows,
        "index_cpu_us_per_row": cpu / rows * 1e6,
        "index_pass_cpu_s": cpu * len(groups) / len(sample),
        "pydantic_pass_cpu_s": pydantic_cpu * len(groups) / len(sample),
        "pydantic_over_arrow": pydantic_cpu / cpu,
        "window_read_cpu_s": window_cpu * len(groups) / len(sample),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/drkernel-prompt-pools"))
    parser.add_argument("--make", type=int, nargs="*", default=[], help="write pools of these many rows")
    parser.add_argument("--rows", type=int, nargs="*", default=[], help="measure the pools of these many rows")
    parser.add_argument("--steady", type=int, default=2000, help="groups pulled for the steady rate")
    parser.add_argument("--window-rows", type=int, default=16384)
    parser.add_argument("--num-cpus", type=int, default=os.cpu_count())
    parser.add_argument("--compare", type=int, nargs="*", default=[], help="cold first group, before vs now")
    parser.add_argument("--repeat", type=int, default=2, help="cold starts of each kind for --compare")
    parser.add_argument("--cpu", type=int, nargs="*", default=[], help="CPU seconds of the index pass of these pools")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/drkernel-prompt-index"), help="verdict cache")
    args = parser.parse_args()
    for rows in args.make:
        make(args.out, rows)
    for rows in args.cpu:
        r = cpu_seconds(pool_dir(args.out, rows), 16, args.window_rows)
        print(json.dumps({"rows": rows, "load": _load(), **{k: round(v, 2) for k, v in r.items()}}), flush=True)
    if not args.rows and not args.compare:
        return
    import ray

    ray.init(
        address="local",
        num_cpus=args.num_cpus,
        include_dashboard=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}},
        log_to_driver=False,
    )
    try:
        for rows in args.compare:
            load = _load()
            r = cold_compare(pool_dir(args.out, rows), args.repeat, args.window_rows, args.cache / str(rows))
            print(json.dumps({"rows": rows, "load_start": load, **{k: round(v, 3) for k, v in r.items()}}), flush=True)
            print(json.dumps({"load_end": _load()}), flush=True)
        for rows in args.rows:
            r = measure(pool_dir(args.out, rows), args.steady, args.window_rows, args.cache / str(rows))
            print(json.dumps({"rows": rows, **{k: round(v, 3) for k, v in r.items()}}), flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
