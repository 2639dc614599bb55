"""`drkernel prepare-data` end to end: real folders, the real sandboxed load check, real parquet; --check."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from drkernel.data.reader import read_rows
from drkernel.tasks import library_parquet_path, library_path
from pipelines.cli import main

GOOD = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x)


def get_inputs():
    return [torch.randn(8)]


def get_init_inputs():
    return []
"""


def test_kernelbench_level1_and_level2_become_200_loadable_rows(tmp_path, capsys, kernelbench):
    out = tmp_path / "kb.parquet"
    levels = ["--src", str(kernelbench / "level1"), "--src", str(kernelbench / "level2")]
    argv = ["prepare-data", *levels, "--out", str(out)]
    assert main(argv) == 0
    assert "wrote 200 rows" in capsys.readouterr().out
    rows, rejected = read_rows(out)
    assert rejected == [] and len(rows) == 200
    assert [r.extra_info.level for r in rows] == [1] * 100 + [2] * 100
    assert len({r.task_uuid for r in rows}) == 200
    assert all(r.data_source == "kernelbench" and "`ModelNew`" in r.prompt[0].content for r in rows)


def test_shipped_parquet_is_in_sync_with_the_library(tmp_path):
    """Rebuilding from drkernel/tasks/library gives the committed rows (uuids, sources, prompts)."""
    out = tmp_path / "library.parquet"
    argv = ["prepare-data", "--src", str(library_path()), "--out", str(out), "--data-source", "drkernel_tasks"]
    assert main(argv) == 0
    rebuilt, _ = read_rows(out)
    shipped, _ = read_rows(library_parquet_path())
    hint = (
        "stale; rebuild: drkernel prepare-data --src drkernel/tasks/library"
        " --out drkernel/tasks/library.parquet --data-source drkernel_tasks"
    )
    assert {r.task_uuid: r.reference_code for r in shipped} == {r.task_uuid: r.reference_code for r in rebuilt}, hint
    assert [r.to_record() for r in shipped] == [r.to_record() for r in rebuilt], hint


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


def test_invalid_files_abort_and_name_the_file(tmp_path, capsys):
    src = tmp_path / "refs"
    write(src, "1_Good.py", GOOD)
    bad = write(src, "2_Broken.py", "class Model(:\n")
    fails = write(src, "3_Fails.py", GOOD.replace("import torch\n", "import torch\nraise ValueError('no')\n", 1))
    out = tmp_path / "out.parquet"
    assert main(["prepare-data", "--src", str(src), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}: does not parse: line 1" in err
    assert f"{fails}: does not load: ValueError: no" in err
    assert "2 invalid reference(s), nothing written" in err and not out.exists()


def test_skip_invalid_writes_the_rest_and_reports_each_skip(tmp_path, capsys):
    src = tmp_path / "refs"
    write(src, "1_Good.py", GOOD)
    write(src, "2_Also.py", GOOD + "\n# another\n")
    bad = write(src, "3_NoInputs.py", GOOD.replace("def get_inputs", "def inputs"))
    out = tmp_path / "out.parquet"
    assert main(["prepare-data", "--src", str(src), "--out", str(out), "--skip-invalid", "--level=4"]) == 0
    captured = capsys.readouterr()
    assert f"{bad}: does not define def get_inputs()" in captured.err
    assert "wrote 2 rows" in captured.out and "skipped 1 invalid" in captured.out
    rows, _ = read_rows(out)
    assert [r.extra_info.module_name for r in rows] == ["1_Good", "2_Also"] and {r.extra_info.level for r in rows} == {
        4
    }


def test_all_invalid_with_skip_writes_nothing(tmp_path, capsys):
    src = tmp_path / "refs"
    write(src, "1_Bad.py", "x = (\n")
    assert main(["prepare-data", "--src", str(src), "--out", str(tmp_path / "o.parquet"), "--skip-invalid"]) == 1
    assert "no valid references left" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--src", "{tmp}/missing", "--out", "{tmp}/o.parquet"], "missing: source folder does not exist"),
        (["--src", "{tmp}/empty", "--out", "{tmp}/o.parquet"], "empty: no references found"),
        (["--src", "{tmp}/empty", "--out", "{tmp}/o.csv"], "--out must name a .parquet file"),
        (["--out", "{tmp}/o.parquet"], "the following arguments are required: --src"),
        (["--src", "{tmp}/empty", "--out", "{tmp}/empty"], "--out names a directory"),
        (["--src", "{tmp}/empty", "--out", "{tmp}/dir.parquet"], "--out names a directory"),
        (["--src", "{tmp}/empty", "--out", "{tmp}/exists.parquet"], "exists.parquet exists; pass --force"),
        (["--check", "{tmp}/missing"], "prompt file or folder not found"),
        (["--check", "{tmp}/empty"], "no .parquet files in the prompt folder"),
        (["--check", "{tmp}/empty", "--out", "{tmp}/o.parquet"], "--check validates a pool; it takes no --src"),
        (["--check", "{tmp}/empty", "--max-prompt-tokens", "9"], "--max-prompt-tokens needs --tokenizer"),
        (["--check", "{tmp}/empty", "--tokenizer", "{tmp}/empty"], "cannot load tokenizer"),
    ],
)
def test_usage_errors_exit_2_with_one_line(tmp_path, capsys, args, message):
    (tmp_path / "empty").mkdir()
    (tmp_path / "dir.parquet").mkdir()
    (tmp_path / "exists.parquet").write_bytes(b"precious")
    assert main(["prepare-data", *[a.format(tmp=tmp_path) for a in args]]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_an_existing_output_is_replaced_only_with_force(tmp_path, capsys):
    src = tmp_path / "refs"
    write(src, "1_Good.py", GOOD)
    out = tmp_path / "out.parquet"
    out.write_bytes(b"precious")
    argv = ["prepare-data", "--src", str(src), "--out", str(out), "--no-load-check"]
    assert main(argv) == 2 and out.read_bytes() == b"precious"
    assert main([*argv, "--force"]) == 0
    assert [r.extra_info.module_name for r in read_rows(out)[0]] == ["1_Good"]


def test_a_reference_is_never_run_outside_the_sandbox(tmp_path, capsys):
    """A reference that writes to disk on import is reported, and its file never appears."""
    target = tmp_path / "written_on_import.txt"
    src = tmp_path / "refs"
    write(src, "1_Writes.py", f"open({str(target)!r}, 'w').write('x')\n" + GOOD)
    out = tmp_path / "out.parquet"
    assert main(["prepare-data", "--src", str(src), "--out", str(out)]) == 1
    assert "1_Writes.py: does not load: " in capsys.readouterr().err
    assert not target.exists() and not out.exists()


def pool_records(n: int) -> list[dict]:
    return [
        {
            "data_source": "cuda_llm",
            "prompt": [{"role": "user", "content": f"task {i} " + "optimize this kernel " * (3 + 4 * i)}],
            "ability": "kernel_optimization",
            "reward_model": {"ground_truth": GOOD, "style": "rule"},
            "extra_info": {"entry_point": "Model", "uuid": f"u{i}", "level": 1, "ops": ["torch.tanh"]},
        }
        for i in range(n)
    ]


def test_check_reports_every_bad_row_by_file_row_uuid_and_field(tmp_path, capsys):
    records = pool_records(7)
    records[5]["reward_model"] = {"ground_truth": "", "style": "rule"}
    pq.write_table(pa.Table.from_pylist(records[:3]), tmp_path / "a.parquet")
    strings = [
        {**r, "prompt": json.dumps(r["prompt"]), "reward_model": json.dumps(r["reward_model"])} for r in records[3:]
    ]
    strings[0]["prompt"] = "not json"
    pq.write_table(pa.Table.from_pylist(strings), tmp_path / "b.parquet")
    assert main(["prepare-data", "--check", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{tmp_path}: 7 rows in 2 file(s), 5 valid, 2 invalid"
    assert lines[1].startswith(f"bad row: {tmp_path / 'b.parquet'}: row 0 (uuid u3): prompt: ")
    assert lines[2].startswith(f"bad row: {tmp_path / 'b.parquet'}: row 2 (uuid u5): reward_model.ground_truth: ")
    pq.write_table(pa.Table.from_pylist(records[:3]), tmp_path / "b.parquet")
    assert main(["prepare-data", "--check", str(tmp_path)]) == 0


def test_check_token_lengths_are_computed_once_and_cached(tmp_path, capsys, monkeypatch):
    from drkernel.model.tokenizer import build_tokenizer
    from drkernel.sft.data import prompt_ids

    monkeypatch.setenv("DRKERNEL_CACHE_DIR", str(tmp_path / "cache"))
    records = pool_records(10)
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "pool.parquet")
    tokenizer = build_tokenizer([r["prompt"][0]["content"] for r in records], vocab_size=300)
    tokenizer.save_pretrained(tmp_path / "tok")
    lengths = sorted(len(prompt_ids(tokenizer, r["prompt"])) for r in records)
    argv = [
        "prepare-data",
        "--check",
        str(tmp_path / "pool.parquet"),
        "--tokenizer",
        str(tmp_path / "tok"),
        "--max-prompt-tokens",
        str(lengths[6]),
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        out[1] == f"prompt tokens ({tmp_path / 'tok'}, computed): p50 {lengths[5]}, p90 {lengths[9]}, "
        f"p99 {lengths[9]}, max {lengths[9]}"
    )
    assert out[2] == f"prompts longer than {lengths[6]} tokens: 3 of 10 (30.0%)"
    assert main(argv) == 0
    assert "from the cache" in capsys.readouterr().out
    assert len(list((tmp_path / "cache" / "prompt_lengths").glob("*.npy"))) == 1
