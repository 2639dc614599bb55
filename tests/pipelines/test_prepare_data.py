"""`drkernel prepare-data` end to end: real folders, the real load-check subprocess, real parquet."""

from __future__ import annotations

from pathlib import Path

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
    assert [r.extra_info.module_name for r in rows] == ["1_Good", "2_Also"] and {r.extra_info.level for r in rows} == {4}


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
    ],
)
def test_usage_errors_exit_2_with_one_line(tmp_path, capsys, args, message):
    (tmp_path / "empty").mkdir()
    assert main(["prepare-data", *[a.format(tmp=tmp_path) for a in args]]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
