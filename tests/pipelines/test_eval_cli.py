"""`drkernel eval`'s refusals (one line, exit 2, before Ray starts) and the named KernelBench subset."""

from __future__ import annotations

import pytest

from pipelines.cli import main
from pipelines.evaluate import task_names

REPO_SUBSET = "benchmarks/kernelbench_l1_20.txt"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "/nowhere"], "not an HF model folder"),
        (["--policy", "solution:", "--tasks", "add"], "not an HF model folder"),
        (["--policy", "reference", "--tasks", "@/nowhere.txt"], "no such file"),
        (["--policy", "reference", "--tasks", "nope"], "no task named 'nope'"),
        (["--policy", "reference", "--limit", "0"], "--limit"),
        (
            ["--policy", "reference", "--reference", "compile", "verifier.options.timing=cpu_model"],
            "cannot be priced by the CPU cost model",
        ),
        (["--policy", "reference", "eval.rounds=0"], "eval.rounds"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path, capsys):
    assert main(["eval", "--out", str(tmp_path / "out"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "out" / "records.jsonl").exists()


def test_the_named_level1_subset_resolves_to_twenty_kernelbench_problems(kernelbench, tmp_path):
    from drkernel.data.kernelbench import build_row, discover
    from drkernel.data.reader import write_rows
    from drkernel.eval.tasks import load_tasks

    names = task_names("@" + str(__import__("pathlib").Path(__file__).resolve().parents[2] / REPO_SUBSET))
    assert names is not None and len(names) == 20
    refs, _ = discover(kernelbench / "level1")
    write_rows([build_row(r, "kernelbench") for r in refs if r.path.stem in names], tmp_path / "l1.parquet")
    assert [row.extra_info.module_name for _, row in load_tasks(tmp_path / "l1.parquet", names)] == names
    assert task_names(" add, relu ,") == ["add", "relu"] and task_names(None) is None
