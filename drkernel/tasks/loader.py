"""Read the task library from disk.

Each task is a folder `library/<name>/` holding `task.yaml`, `reference.py` (KernelBench `Model`)
and one or more `solution_<label>.py` files (`ModelNew`). The folders are data, not packages: their
sources are read as text and handed to the verifier, never imported here. `library.parquet` next
to the folder is the same set as a prompt pool (built by `drkernel prepare-data`, see
`library_parquet_path`).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, Field, ValidationError

from drkernel.config.base import StrictModel
from drkernel.types.task_category import Category

REFERENCE_FILE = "reference.py"
META_FILE = "task.yaml"
SOLUTION_PREFIX = "solution_"


class TaskError(ValueError):
    """A task folder that does not follow the library layout."""


class TaskMeta(StrictModel):
    """The contents of `task.yaml`."""

    name: str = Field(description="task name; must equal the folder name")
    category: Category = Field(description="kind of computation")
    level: int = Field(ge=1, le=2, description="1 for a single op, 2 for a fused chain")
    ops: list[str] = Field(min_length=1, description="torch ops the reference uses")
    description: str = Field(min_length=1, description="one line saying what the model computes")


class Task(BaseModel):
    """One task: metadata, reference source and solution sources keyed by label (`fused`, `simple`)."""

    name: str
    category: Category
    level: int
    ops: list[str]
    description: str
    reference: str
    solutions: dict[str, str]
    path: Path


def library_path() -> Path:
    """Folder of the shipped task library (inside the installed package)."""
    return Path(__file__).resolve().parent / "library"


def library_parquet_path() -> Path:
    """The shipped prompt pool built from the library.

    Rebuild after editing a task: `drkernel prepare-data --src drkernel/tasks/library
    --out drkernel/tasks/library.parquet --data-source drkernel_tasks`.
    """
    return Path(__file__).resolve().parent / "library.parquet"


def load_task(folder: Path) -> Task:
    """Read one task folder; raise TaskError naming the folder when anything is missing or wrong."""
    folder = Path(folder)
    meta_path = folder / META_FILE
    ref_path = folder / REFERENCE_FILE
    for required in (meta_path, ref_path):
        if not required.is_file():
            raise TaskError(f"task {folder}: missing {required.name}")
    try:
        raw = yaml.safe_load(meta_path.read_text())
        meta = TaskMeta.model_validate(raw)
    except (yaml.YAMLError, ValidationError) as err:
        raise TaskError(f"task {folder}: invalid {META_FILE}: {err}") from err
    if meta.name != folder.name:
        raise TaskError(f"task {folder}: {META_FILE} name {meta.name!r} differs from the folder name")
    solutions = {p.stem[len(SOLUTION_PREFIX) :]: p.read_text() for p in sorted(folder.glob(f"{SOLUTION_PREFIX}*.py"))}
    if not solutions:
        raise TaskError(f"task {folder}: no {SOLUTION_PREFIX}<label>.py files")
    reference = ref_path.read_text()
    if "class Model(" not in reference:
        raise TaskError(f"task {folder}: {REFERENCE_FILE} defines no `class Model(`")
    for label, source in solutions.items():
        if "class ModelNew(" not in source:
            raise TaskError(f"task {folder}: {SOLUTION_PREFIX}{label}.py defines no `class ModelNew(`")
    return Task(**meta.model_dump(), reference=reference, solutions=solutions, path=folder)


def load_tasks(root: Path | None = None, categories: list[Category] | None = None) -> list[Task]:
    """The tasks under `root` (default: the shipped library) of `categories` (default: all), sorted by name."""
    root = Path(root) if root is not None else library_path()
    if not root.is_dir():
        raise TaskError(f"task library {root} is not a folder")
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
    tasks = [load_task(folder) for folder in folders]
    if categories is None:
        return tasks
    chosen = [t for t in tasks if t.category in categories]
    if not chosen:
        have = sorted({t.category for t in tasks})
        raise TaskError(f"task library {root} has no task of categories {categories} (it has {have})")
    return chosen
