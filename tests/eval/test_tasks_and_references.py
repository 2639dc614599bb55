"""Picking tasks by name, and the torch.compile reference's source."""

from __future__ import annotations

import pytest
import torch

from drkernel.eval.references import reference_source
from drkernel.eval.tasks import load_tasks
from drkernel.tasks import library_path


def test_tasks_by_name_in_the_order_asked():
    picked = load_tasks(None, ["relu", "add"])
    assert [name for name, _ in picked] == ["relu", "add"]
    assert "triton" in picked[0][1].prompt[-1].content.lower()


def test_kernelbench_problems_answer_to_their_file_name_too(kernelbench, tmp_path):
    from drkernel.data.kernelbench import build_row, discover
    from drkernel.data.reader import write_rows

    refs, _ = discover(kernelbench / "level1")
    write_rows(
        [build_row(r, "kernelbench") for r in refs if r.path.stem in ("19_ReLU", "23_Softmax")], tmp_path / "l1.parquet"
    )
    picked = load_tasks(tmp_path / "l1.parquet", ["19_ReLU", "Softmax"])
    assert [name for name, _ in picked] == ["ReLU", "Softmax"]


def test_unknown_or_repeated_names_are_refused():
    with pytest.raises(ValueError, match="no task named 'nope'"):
        load_tasks(None, ["nope"])
    with pytest.raises(ValueError, match="twice"):
        load_tasks(None, ["add", "add"])


def test_the_compiled_reference_keeps_the_tasks_weights_and_compiles_forward():
    source = (library_path() / "linear_relu" / "reference.py").read_text()
    assert reference_source(source, "Model", "eager") == source
    eager, compiled = {}, {}
    exec(compile(source, "ref", "exec"), eager)
    exec(compile(reference_source(source, "Model", "compile"), "ref", "exec"), compiled)
    torch.manual_seed(42)
    a = eager["Model"](*eager["get_init_inputs"]())
    torch.manual_seed(42)
    b = compiled["Model"](*compiled["get_init_inputs"]())
    assert a.state_dict().keys() == b.state_dict().keys()
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())
    assert type(b.forward).__name__ != "method"  # torch.compile's wrapper, not the plain bound method
    with pytest.raises(ValueError, match="not a Python name"):
        reference_source(source, "not a name", "compile")


def test_the_compiled_reference_loads_when_the_task_names_its_class_in_super():
    """KernelBench's style, `super(Model, self).__init__()`: the compiled reference must not recurse."""
    source = (
        "import torch\n\nclass Model(torch.nn.Module):\n    def __init__(self, n):\n"
        "        super(Model, self).__init__()\n        self.w = torch.nn.Parameter(torch.ones(n))\n\n"
        "    def forward(self, x):\n        return torch.relu(x * self.w)\n\n"
        "def get_inputs():\n    return [torch.randn(2, 4)]\n\ndef get_init_inputs():\n    return [4]\n"
    )
    namespace: dict = {}
    exec(compile(reference_source(source, "Model", "compile"), "ref", "exec"), namespace)
    model = namespace["Model"](4)
    assert isinstance(model, torch.nn.Module) and type(model.forward).__name__ != "method"
    x = torch.randn(2, 4)
    assert torch.equal(model.forward._torchdynamo_orig_callable(x), torch.relu(x))


def test_a_reference_answers_for_itself_under_the_new_name(kernelbench):
    from drkernel.eval.answers import reference_answer

    source = (kernelbench / "level1" / "19_ReLU.py").read_text()
    answer = reference_answer(source, "Model")
    namespace: dict = {}
    exec(compile(answer, "answer", "exec"), namespace)
    assert "ModelNew" in namespace and "Model" not in namespace
    x = torch.randn(4, 8)
    assert torch.equal(namespace["ModelNew"](*namespace["get_init_inputs"]())(x), torch.relu(x))
