"""The shipped task library: its layout, its loader, and the verifier's verdict on every solution."""

from __future__ import annotations

import ast
import shutil
from collections import Counter
from pathlib import Path

import pytest

from drkernel.tasks import Task, TaskError, library_path, load_task, load_tasks

MIN_TASKS = 48
CATEGORIES = {"elementwise", "reduction", "norm", "matmul", "fused"}
ALLOWED_IMPORTS = {"torch", "torch.nn", "torch.nn.functional", "triton", "triton.language"}

TASKS = load_tasks()
SOLUTIONS = [(t.name, label) for t in TASKS for label in sorted(t.solutions)]


def _imports(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
    return names


def _calls(tree: ast.Module, dotted: str) -> list[ast.Call]:
    """Calls written as `tl.load(...)` etc. (attribute chains only)."""
    head, _, attr = dotted.rpartition(".")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == attr:
            if isinstance(node.func.value, ast.Name) and node.func.value.id == head:
                found.append(node)
    return found


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _block_accesses(kernel: ast.FunctionDef) -> list[ast.Call]:
    """tl.load/tl.store calls whose address depends on tl.arange: those must carry a mask.

    Scalar accesses at a program-id offset (a per-row weight, a per-row result) are in bounds by
    construction and may go unmasked.
    """
    tainted: set[str] = set()
    assigns = [
        n for n in ast.walk(kernel) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and n.value is not None
    ]
    while True:
        before = len(tainted)
        for node in assigns:
            if "arange" in ast.unparse(node.value) or _names(node.value) & tainted:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    tainted |= _names(target)
        if len(tainted) == before:
            break
    accesses = []
    for node in ast.walk(kernel):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("load", "store")
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "tl"
            and node.args
            and ("arange" in ast.unparse(node.args[0]) or _names(node.args[0]) & tainted)
        ):
            accesses.append(node)
    return accesses


# ---------------------------------------------------------------- structure


def test_library_size_and_categories():
    assert len(TASKS) >= MIN_TASKS
    assert [t.name for t in TASKS] == sorted(t.name for t in TASKS)
    counts = Counter(t.category for t in TASKS)
    assert set(counts) == CATEGORIES, counts
    assert {t.level for t in TASKS} == {1, 2}


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_task_structure(task: Task):
    assert task.path.name == task.name
    assert not (task.path / "__init__.py").exists(), "task folders are data, not packages"
    assert len(task.solutions) >= 2
    ref_tree = ast.parse(task.reference)
    top = {n.name for n in ref_tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    assert {"Model", "get_inputs", "get_init_inputs"} <= top
    assert _imports(ref_tree) <= ALLOWED_IMPORTS
    assert "cuda" not in task.reference


@pytest.mark.parametrize(("name", "label"), SOLUTIONS)
def test_solution_static_rules(name: str, label: str):
    """Self-contained, portable, interpreter-safe: allowed imports, no autotune, masked loads."""
    source = next(t for t in TASKS if t.name == name).solutions[label]
    tree = ast.parse(source)
    assert _imports(tree) <= ALLOWED_IMPORTS
    assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)
    jitted = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and any(ast.unparse(d).startswith("triton.jit") for d in n.decorator_list)
    ]
    assert jitted, "no @triton.jit kernel"
    for banned in ("autotune", "libdevice", "inline_asm", "extern_elementwise", "cuda", "bfloat16"):
        assert banned not in source, banned
    assert _calls(tree, "tl.load")
    for kernel in jitted:
        for call in _block_accesses(kernel):
            assert any(k.arg == "mask" for k in call.keywords), f"unmasked block access at line {call.lineno}"


def test_mask_rule_catches_an_unmasked_block_load():
    kernel = ast.parse(
        "@triton.jit\n"
        "def k(x_ptr, o_ptr, w_ptr, BLOCK: tl.constexpr):\n"
        "    row = tl.program_id(0)\n"
        "    base = row * BLOCK\n"
        "    offs = base + tl.arange(0, BLOCK)\n"
        "    idx = offs * 2\n"
        "    w = tl.load(w_ptr + row)\n"
        "    x = tl.load(x_ptr + idx)\n"
        "    tl.store(o_ptr + idx, x * w, mask=idx < 10)\n"
    ).body[0]
    flagged = _block_accesses(kernel)
    assert [ast.unparse(c.args[0]) for c in flagged] == ["x_ptr + idx", "o_ptr + idx"]
    assert [any(k.arg == "mask" for k in c.keywords) for c in flagged] == [False, True]


# ---------------------------------------------------------------- loader


def _copy_task(tmp_path: Path, name: str = "relu") -> Path:
    dest = tmp_path / "lib" / name
    shutil.copytree(library_path() / name, dest)
    return dest


def test_load_tasks_reads_a_copied_library(tmp_path: Path):
    _copy_task(tmp_path, "relu")
    _copy_task(tmp_path, "add")
    (tmp_path / "lib" / "__pycache__").mkdir()
    tasks = load_tasks(tmp_path / "lib")
    assert [t.name for t in tasks] == ["add", "relu"]
    relu = tasks[1]
    assert relu.category == "elementwise" and relu.level == 1
    assert set(relu.solutions) == {"fused", "simple"}
    assert "class ModelNew(" in relu.solutions["fused"]
    assert relu.reference == (library_path() / "relu" / "reference.py").read_text()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: (d / "task.yaml").unlink(), "missing task.yaml"),
        (lambda d: (d / "reference.py").unlink(), "missing reference.py"),
        (lambda d: [p.unlink() for p in d.glob("solution_*.py")], "no solution_"),
        (
            lambda d: (d / "task.yaml").write_text("name: relu\ncategory: conv\nlevel: 1\nops: [x]\ndescription: d\n"),
            "category",
        ),
        (
            lambda d: (d / "task.yaml").write_text(
                "name: other\ncategory: fused\nlevel: 2\nops: [x]\ndescription: d\n"
            ),
            "differs from the folder",
        ),
        (
            lambda d: (d / "task.yaml").write_text(
                "name: relu\ncategory: fused\nlevel: 2\nops: [x]\ndescription: d\nextra: 1\n"
            ),
            "extra",
        ),
        (lambda d: (d / "task.yaml").write_text("name: [unclosed\n"), "invalid task.yaml"),
        (lambda d: (d / "solution_fused.py").write_text("import torch\n"), "solution_fused.py defines no"),
    ],
)
def test_malformed_task_names_the_folder(tmp_path: Path, damage, message: str):
    folder = _copy_task(tmp_path)
    damage(folder)
    with pytest.raises(TaskError) as err:
        load_tasks(tmp_path / "lib")
    assert str(folder) in str(err.value)
    assert message in str(err.value)


def test_missing_library_is_a_clear_error(tmp_path: Path):
    with pytest.raises(TaskError, match="is not a folder"):
        load_tasks(tmp_path / "nowhere")


def test_load_task_single_folder():
    task = load_task(library_path() / "row_sum")
    assert task.category == "reduction" and task.ops == ["torch.sum"]


def test_categories_select_tasks_for_sft_and_the_prompt_pool(tmp_path: Path):
    from drkernel.data.reader import read_rows
    from drkernel.tasks.prompt_pool import build_prompt_pool

    chosen = load_tasks(categories=["elementwise", "norm"])
    want = sorted(t.name for t in TASKS if t.category in ("elementwise", "norm"))
    assert sorted(t.name for t in chosen) == want and {t.category for t in chosen} == {"elementwise", "norm"}
    rows, errors = read_rows(build_prompt_pool(tmp_path / "pool.parquet", categories=["norm"]))
    norms = sorted(t.name for t in TASKS if t.category == "norm")
    assert not errors and sorted(r.extra_info.name for r in rows) == norms
    only_add = tmp_path / "lib"
    shutil.copytree(library_path() / "add", only_add / "add")
    with pytest.raises(TaskError, match=r"no task of categories \['norm'\].*elementwise"):
        load_tasks(only_add, ["norm"])
    with pytest.raises(ValueError, match="holds no tasks of categories"):
        build_prompt_pool(tmp_path / "none.parquet", only_add, categories=["norm"])
