"""KernelBench folders -> rows: layouts, static checks, ops, stable uuids."""

from __future__ import annotations

import ast

import pytest

from drkernel.data.kernelbench import ReferenceFileError, build_row, check_static, discover, torch_ops
from drkernel.types.task_row import source_uuid

GOOD = """import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import nn as tnn


class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = tnn.Linear(d, d)
        self.w = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return F.gelu(self.lin(x)) * torch.sigmoid(x) + x.sum()


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8]
"""


def test_ops_resolve_aliases_and_skip_input_construction():
    ops = torch_ops(ast.parse(GOOD))
    assert ops == ["torch.nn.Linear", "torch.nn.functional.gelu", "torch.ones", "torch.sigmoid"]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def broken(:\n", "does not parse: line 1"),
        (GOOD.replace("class Model(", "class Other("), "does not define class Model"),
        (GOOD.replace("def get_init_inputs", "def other"), "does not define def get_init_inputs()"),
    ],
)
def test_static_check_names_the_file_and_the_problem(source, message):
    with pytest.raises(ReferenceFileError, match=message) as info:
        check_static(source, "refs/7_Thing.py")
    assert info.value.path == "refs/7_Thing.py" and str(info.value).startswith("refs/7_Thing.py: ")


def test_flat_layout_level_from_folder_and_sorted_numerically(tmp_path):
    folder = tmp_path / "level3"
    folder.mkdir()
    for name in ("10_Ten.py", "2_Two.py", "__init__.py"):
        (folder / name).write_text(GOOD)
    refs, errors = discover(folder)
    assert errors == [] and [(r.problem_id, r.name, r.level) for r in refs] == [(2, "Two", 3), (10, "Ten", 3)]
    refs, _ = discover(folder, level=1)
    assert {r.level for r in refs} == {1}


def test_task_folder_layout_with_yaml(tmp_path):
    (tmp_path / "relu").mkdir()
    (tmp_path / "relu" / "reference.py").write_text(GOOD)
    (tmp_path / "relu" / "task.yaml").write_text("name: relu\ncategory: elementwise\nlevel: 2\nops: [torch.relu]\n")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "reference.py").write_text(GOOD + "\n# plain\n")
    refs, errors = discover(tmp_path)
    assert errors == []
    rows = {r.name: build_row(r, "drkernel_tasks") for r in refs}
    relu, plain = rows["relu"].extra_info, rows["plain"].extra_info
    assert (relu.level, relu.ops, relu.model_extra["category"]) == (2, ["torch.relu"], "elementwise")
    assert plain.level is None and "torch.sigmoid" in plain.ops and plain.module_name == "plain"
    assert relu.uuid == source_uuid(GOOD) != plain.uuid


def test_bad_task_folders_are_reported_not_dropped(tmp_path):
    (tmp_path / "no_ref").mkdir()
    (tmp_path / "bad_yaml").mkdir()
    (tmp_path / "bad_yaml" / "reference.py").write_text(GOOD)
    (tmp_path / "bad_yaml" / "task.yaml").write_text("name: x\nlevle: 2\n")
    (tmp_path / "ok.py").write_text(GOOD)
    refs, errors = discover(tmp_path)
    assert [r.name for r in refs] == ["ok"]
    messages = sorted(str(e) for e in errors)
    assert "bad_yaml/task.yaml: levle: Extra inputs are not permitted" in messages[0]
    assert messages[1].endswith("no_ref: task folder without reference.py")


def test_missing_and_empty_sources(tmp_path):
    with pytest.raises(ReferenceFileError, match="does not exist"):
        discover(tmp_path / "nowhere")
    with pytest.raises(ReferenceFileError, match="no references found"):
        discover(tmp_path)
    (tmp_path / "f.py").write_text(GOOD)
    with pytest.raises(ReferenceFileError, match="not a folder"):
        discover(tmp_path / "f.py")


def test_row_contents_and_uuid_stability(tmp_path):
    (tmp_path / "5_Gelu.py").write_text(GOOD)
    [ref], _ = discover(tmp_path, level=1)
    row = build_row(ref, "kernelbench", prompt_style="compact")
    again = build_row(discover(tmp_path, level=1)[0][0], "kernelbench", prompt_style="compact")
    assert row == again and row.extra_info.uuid == source_uuid(GOOD)
    assert row.reference_code == GOOD and GOOD.strip("\n") in row.prompt[0].content
    assert (row.data_source, row.ability, row.reward_model.style) == ("kernelbench", "kernel_optimization", "rule")
    assert row.extra_info.model_extra["problem_id"] == 5 and row.extra_info.module_name == "5_Gelu"


def test_every_level1_and_level2_reference_passes_the_static_check(kernelbench):
    refs = []
    for level in (1, 2):
        found, errors = discover(kernelbench / f"level{level}")
        assert errors == []
        refs += found
    rows = [build_row(r, "kernelbench") for r in refs]
    assert len(rows) == 200 and len({r.task_uuid for r in rows}) == 200
    ops = {r.extra_info.module_name: r.extra_info.ops for r in rows}
    assert ops["19_ReLU"] == ["torch.relu"]
    assert ops["1_Conv2D_ReLU_BiasAdd"] == ["torch.nn.Conv2d", "torch.randn", "torch.relu"]
    assert ops["12_Matmul_with_diagonal_matrices_"] == []  # only `*` and tensor methods: no torch call
