"""Which tasks an evaluation runs: rows of a parquet pool or of a task folder, optionally picked by name.

A task is named by its `extra_info.name` (a library folder, a KernelBench problem's name), else its module name,
else its uuid; `--tasks` accepts either the name or the module name (`19_ReLU` or `ReLU`). Names must be unique,
because records and resumes are keyed by them.
"""

from __future__ import annotations

from pathlib import Path

from drkernel.data.kernelbench import build_row, discover
from drkernel.data.reader import read_rows
from drkernel.tasks.loader import library_path
from drkernel.types.task_row import TaskRow


def task_name(row: TaskRow) -> str:
    extra = row.extra_info.model_extra or {}
    return str(extra.get("name") or row.extra_info.module_name or row.task_uuid)


def load_tasks(
    data: str | Path | None, names: list[str] | None, tasks_dir: str | Path | None = None, prompt_style: str = "compact"
) -> list[tuple[str, TaskRow]]:
    """(name, row) pairs in pool order: the rows of `data`, else the tasks of `tasks_dir` (default: the shipped
    library) in `prompt_style`; only `names` when given (each must exist)."""
    if data is not None:
        rows, errors = read_rows(data)
        if errors:
            raise ValueError(f"{data}: {len(errors)} bad row(s), the first: {errors[0]}")
    else:
        refs, errors = discover(tasks_dir or library_path())
        if errors:
            raise ValueError(f"task folder {tasks_dir or library_path()}: {errors[0]}")
        rows = [build_row(ref, "drkernel_tasks", prompt_style) for ref in refs]  # type: ignore[arg-type]
    named: dict[str, TaskRow] = {}
    aliases: dict[str, str] = {}
    for row in rows:
        name = task_name(row)
        if name in named:
            raise ValueError(f"two tasks are named {name!r}; evaluation records are keyed by task name")
        named[name] = row
        if row.extra_info.module_name:
            aliases[row.extra_info.module_name] = name
    if names is None:
        return list(named.items())
    picked = []
    for wanted in names:
        name = wanted if wanted in named else aliases.get(wanted)
        if name is None:
            known = ", ".join(list(named)[:8])
            raise ValueError(f"no task named {wanted!r} (there are {len(named)}, e.g. {known})")
        picked.append((name, named[name]))
    if len({n for n, _ in picked}) != len(picked):
        raise ValueError("a task was named twice in --tasks")
    return picked
