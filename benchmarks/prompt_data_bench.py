"""Prompt data at the dataset's scale: the validation pass and token lengths, in rows/s, in one process.

A synthetic pool shaped like hkust-nlp/drkernel-rl-data (71,996 rows: data_source 'cuda_llm', a
one-turn user prompt that embeds the reference, ability 'kernel_optimization', reward_model
{ground_truth, style 'rule'}, extra_info {entry_point, uuid, level, ops, module_name, original_prompt,
repo_name, type}), several KB a row, written as 1 file of structs and as 8 files that alternate
struct and JSON-string storage, with a few broken rows. The stream over such pools (Ray Data, the prompt
actor's memory, first group, epoch switch, resume) is measured by benchmarks/prompt_stream_bench.py.

    python benchmarks/prompt_data_bench.py                       # 72k rows, 1 and 8 files
    python benchmarks/prompt_data_bench.py --rows 2000 --files 1 # a smoke run
    python benchmarks/prompt_data_bench.py --lengths 8000        # + token lengths of 8k rows (tiny tokenizer)
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import multiprocessing
import random
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from drkernel.data.lengths import PromptLengths, percentiles  # noqa: E402
from drkernel.data.reader import scan  # noqa: E402

OPS = [
    "torch.relu",
    "torch.matmul",
    "torch.nn.Conv2d",
    "torch.softmax",
    "torch.sum",
    "torch.nn.LayerNorm",
    "torch.tanh",
    "torch.nn.functional.gelu",
    "torch.bmm",
    "torch.max",
    "torch.nn.BatchNorm2d",
    "torch.exp",
]
BROKEN_EVERY = 9000  # one broken row per this many rows


def reference(rng: random.Random, ops: list[str]) -> str:
    """A KernelBench-style reference of 1-3 KB."""
    body = "\n".join(
        f"        x = {op}(x)  # step {i}: {'keeps the shape ' * rng.randint(1, 4)}"
        for i, op in enumerate(ops * rng.randint(2, 6))
    )
    doc = " ".join(rng.choice(["compute", "the", "tensor", "block", "fused", "kernel", "reduce"]) for _ in range(60))
    return (
        f'import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    """{doc}"""\n\n'
        f"    def __init__(self):\n        super().__init__()\n\n    def forward(self, x):\n{body}\n"
        f"        return x\n\n\ndef get_inputs():\n    return [torch.randn({rng.randint(16, 4096)}, "
        f"{rng.randint(16, 4096)})]\n\n\ndef get_init_inputs():\n    return []\n"
    )


def record(rng: random.Random, i: int) -> dict:
    ops = rng.sample(OPS, rng.randint(1, 4))
    ref = reference(rng, ops)
    prompt = (
        "You write custom Triton kernels to replace the pytorch operators in the given architecture "
        "to get speedups. " * rng.randint(4, 12) + f"\n\n```python\n{ref}```\n\nOptimize the architecture "
        "named Model with custom Triton operators! Name your optimized output architecture ModelNew."
    )
    return {
        "data_source": "cuda_llm",
        "prompt": [{"role": "user", "content": prompt}],
        "ability": "kernel_optimization",
        "reward_model": {"ground_truth": ref, "style": "rule"},
        "extra_info": {
            "entry_point": "Model",
            "uuid": f"cudallm-{i:06d}",
            "level": rng.randint(1, 3),
            "ops": ops,
            "module_name": f"module_{i}",
            "original_prompt": prompt[: rng.randint(500, 1500)],
            "repo_name": f"someone/repo{i % 97}",
            "type": "pytorch",
        },
    }


def broken(rec: dict, kind: int) -> dict:
    """An empty reference or a prompt that does not end with the user's turn."""
    if kind % 2:
        return {**rec, "reward_model": {"ground_truth": "", "style": "rule"}}
    return {**rec, "prompt": [{"role": "assistant", "content": "x"}]}


def write_pool(folder: Path, rows: int, files: int, seed: int = 0) -> tuple[Path, int]:
    """The pool (one file, or a folder of `files`, alternating struct and JSON-string storage); bytes written."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    per_file = -(-rows // files)
    written = 0
    for f in range(files):
        recs = [record(rng, i) for i in range(f * per_file, min(rows, (f + 1) * per_file))]
        for k in range(BROKEN_EVERY // 2, len(recs), BROKEN_EVERY):
            recs[k] = broken(recs[k], f + k // BROKEN_EVERY)
        if f % 2:  # an export that stores the nested columns as JSON strings
            recs = [{**r, **{c: json.dumps(r[c]) for c in ("prompt", "reward_model", "extra_info")}} for r in recs]
        path = folder / f"train-{f:05d}-of-{files:05d}.parquet"
        pq.write_table(pa.Table.from_pylist(recs), path, row_group_size=1024)
        written += path.stat().st_size
    return (folder / "train-00000-of-00001.parquet" if files == 1 else folder), written


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench(path: Path) -> dict:
    """The validation pass over every row, in this process."""
    out: dict = {}
    t, cpu = time.perf_counter(), time.process_time()
    result = scan(path, skip_invalid=True)
    out["validate_s"] = time.perf_counter() - t
    out["validate_cpu_s"] = time.process_time() - cpu
    out["validate_rss_mb"] = peak_rss_mb()
    out["invalid"] = result.num_invalid
    return out


def bench_lengths(path: Path, rows: int, cache: Path) -> dict:
    """Token lengths of the first `rows` valid rows with the tiny tokenizer: cold (tokenize) and warm (cache)."""
    from drkernel.model.tokenizer import build_tokenizer

    result = scan(path, skip_invalid=True, keep_tables=True)
    tables = result.files[:1]
    tables[0].valid = tables[0].valid[:rows]
    texts = [json.dumps(r) for r in tables[0].table.slice(0, 2000).column("prompt").to_pylist()]
    tokenizer = build_tokenizer(texts, vocab_size=4096)
    out = {}
    for label in ("cold", "warm"):
        lengths = PromptLengths(tokenizer, cache)
        t = time.perf_counter()
        found = lengths.for_file(tables[0].path, tables[0].table, tables[0].valid)
        out[f"lengths_{label}_rows_per_s"] = len(found) / (time.perf_counter() - t)
    out["lengths"] = percentiles(found)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=72_000)
    parser.add_argument("--files", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--lengths", type=int, default=0, help="also time token lengths of this many rows")
    args = parser.parse_args()
    logging.getLogger("drkernel").setLevel(logging.ERROR)  # the skipped rows are expected here
    print(f"baseline RSS after imports: {peak_rss_mb():.0f} MB")
    with tempfile.TemporaryDirectory() as tmp:
        for files in args.files:
            t = time.perf_counter()
            with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
                # generated in a child, so the peak RSS below is the prompt path's, not the generator's
                path, size = pool.submit(write_pool, Path(tmp) / f"pool{files}", args.rows, files).result()
            print(
                f"wrote {args.rows} rows in {files} file(s): {size / 2**20:.0f} MB parquet "
                f"in {time.perf_counter() - t:.1f}s",
                flush=True,
            )
            r = bench(path)
            print(
                f"  validation: {r['validate_s']:.2f}s = {args.rows / r['validate_s']:,.0f} rows/s "
                f"(CPU {r['validate_cpu_s']:.2f}s = {args.rows / r['validate_cpu_s']:,.0f} rows/s), "
                f"{r['invalid']} invalid rows found, peak RSS {r['validate_rss_mb']:.0f} MB"
            )
            if args.lengths and files == args.files[0]:
                r = bench_lengths(path, args.lengths, Path(tmp) / "cache")
                gc.collect()
                print(
                    f"  token lengths of {args.lengths} rows: cold {r['lengths_cold_rows_per_s']:,.0f} rows/s, "
                    f"cached {r['lengths_warm_rows_per_s']:,.0f} rows/s; {r['lengths']}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
