"""KernelBench-format reference folders -> prompt-pool rows.

Two layouts are accepted:
- flat: `DIR/<id>_<Name>.py` files, as in KernelBench's `level1/` (the level comes from `--level`
  or a folder named `levelN`);
- task folders: `DIR/<task>/reference.py` with an optional `task.yaml` {name, category, level, ops,
  description}, as in the shipped library `drkernel/tasks/library/`.
Names starting with `_` or `.` are ignored (`__init__.py`, `__pycache__`). Every reference is
checked statically here (it parses and defines the entry point, `get_inputs`, `get_init_inputs`);
`drkernel.verify.reference_check` adds the runtime check.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import Field, ValidationError

from drkernel.config.base import StrictModel
from drkernel.data.prompts import PromptStyle, first_turn_messages
from drkernel.types.task_row import DEFAULT_ABILITY, TaskRow, source_uuid

REFERENCE_FILE = "reference.py"
META_FILE = "task.yaml"
REQUIRED_FUNCTIONS = ("get_inputs", "get_init_inputs")
# Wrappers and containers, not computations.
_NOT_OPS = {
    "torch.nn.Module",
    "torch.nn.Parameter",
    "torch.nn.ModuleList",
    "torch.nn.ModuleDict",
    "torch.nn.ParameterList",
    "torch.nn.Sequential",
}


class ReferenceFileError(ValueError):
    """A reference file or folder that cannot become a row; the message names the path."""

    def __init__(self, path: Path | str, message: str):
        self.path = str(path)
        super().__init__(f"{path}: {message}")


class TaskYaml(StrictModel):
    """Optional `task.yaml` next to a reference; unknown keys are errors (typos do not pass)."""

    name: str | None = Field(None, description="task name (default: the folder name)")
    category: str | None = Field(None, description="kind of computation, e.g. elementwise or norm")
    level: int | None = Field(None, ge=1, description="difficulty level")
    ops: list[str] | None = Field(None, description="torch ops used (default: extracted from the source)")
    description: str | None = Field(None, description="one line saying what the model computes")


@dataclass(frozen=True)
class ReferenceSource:
    """One reference found on disk, before it becomes a row."""

    path: Path
    source: str
    name: str
    level: int | None
    problem_id: int | None
    meta: TaskYaml | None


_LEVEL_DIR = re.compile(r"^level[_-]?(\d+)$", re.IGNORECASE)
_KB_FILE = re.compile(r"^(\d+)_(.+)$")


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ReferenceFileError(path, f"cannot read: {e}") from None


def _read_meta(path: Path) -> TaskYaml | None:
    if not path.is_file():
        return None
    try:
        return TaskYaml.model_validate(yaml.safe_load(_read_text(path)) or {})
    except yaml.YAMLError as e:
        raise ReferenceFileError(path, f"not valid YAML: {e}") from None
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, x['loc'])) or '<root>'}: {x['msg']}" for x in e.errors())
        raise ReferenceFileError(path, problems) from None


def discover(src: Path | str, level: int | None = None) -> tuple[list[ReferenceSource], list[ReferenceFileError]]:
    """Every reference under `src`, sorted; per-file problems are returned, layout problems raised."""
    src = Path(src)
    if not src.exists():
        raise ReferenceFileError(src, "source folder does not exist")
    if not src.is_dir():
        raise ReferenceFileError(src, "source is not a folder")
    dir_match = _LEVEL_DIR.match(src.name)
    default_level = level if level is not None else (int(dir_match.group(1)) if dir_match else None)
    found: list[ReferenceSource] = []
    errors: list[ReferenceFileError] = []
    entries = sorted(p for p in src.iterdir() if not p.name.startswith(("_", ".")))
    for entry in entries:
        try:
            if entry.is_dir():
                ref_path = entry / REFERENCE_FILE
                if not ref_path.is_file():
                    raise ReferenceFileError(entry, f"task folder without {REFERENCE_FILE}")
                meta = _read_meta(entry / META_FILE)
                meta_level = meta.level if meta is not None else None
                found.append(
                    ReferenceSource(
                        path=ref_path,
                        source=_read_text(ref_path),
                        name=(meta.name if meta is not None and meta.name else entry.name),
                        level=level if level is not None else (meta_level or default_level),
                        problem_id=None,
                        meta=meta,
                    )
                )
            elif entry.suffix == ".py":
                kb = _KB_FILE.match(entry.stem)
                found.append(
                    ReferenceSource(
                        path=entry,
                        source=_read_text(entry),
                        name=kb.group(2) if kb else entry.stem,
                        level=default_level,
                        problem_id=int(kb.group(1)) if kb else None,
                        meta=None,
                    )
                )
        except ReferenceFileError as e:
            errors.append(e)
    if not found and not errors:
        raise ReferenceFileError(src, "no references found (expected *.py files or <task>/reference.py folders)")
    found.sort(key=lambda r: (r.level or 0, r.problem_id if r.problem_id is not None else -1, r.name))
    return found, errors


def check_static(source: str, path: Path | str, entry_point: str = "Model") -> ast.Module:
    """Parse the source and require the KernelBench contract's top-level definitions."""
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as e:
        raise ReferenceFileError(path, f"does not parse: line {e.lineno}: {e.msg}") from None
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    missing = [f"class {entry_point}"] if entry_point not in classes else []
    missing += [f"def {name}()" for name in REQUIRED_FUNCTIONS if name not in functions]
    if missing:
        raise ReferenceFileError(path, "does not define " + ", ".join(missing))
    return tree


def _import_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> module path for torch imports (`F` -> `torch.nn.functional`)."""
    aliases = {"torch": "torch"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch" or a.name.startswith("torch."):
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "torch":
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def torch_ops(tree: ast.Module) -> list[str]:
    """Torch callables the model code calls, as full dotted names, sorted.

    Only calls outside `get_inputs`/`get_init_inputs` count (input construction is not the model's
    work); aliases resolve, so `F.gelu` and `torch.nn.functional.gelu` are the same op.
    """
    aliases = _import_aliases(tree)
    ops: set[str] = set()
    for top in tree.body:
        if isinstance(top, ast.FunctionDef) and top.name in REQUIRED_FUNCTIONS:
            continue
        for node in ast.walk(top):
            if not isinstance(node, ast.Call):
                continue
            name = _dotted(node.func)
            if name is None:
                continue
            head, _, rest = name.partition(".")
            if head in aliases:
                full = f"{aliases[head]}.{rest}" if rest else aliases[head]
                if full.startswith("torch.") and full not in _NOT_OPS:
                    ops.add(full)
    return sorted(ops)


def build_row(
    ref: ReferenceSource,
    data_source: str,
    prompt_style: PromptStyle = "full",
    entry_point: str = "Model",
) -> TaskRow:
    """The row for one reference; the uuid hashes the source, so it is stable across runs."""
    tree = check_static(ref.source, ref.path, entry_point)
    meta = ref.meta or TaskYaml()
    extra: dict[str, object] = {
        "entry_point": entry_point,
        "uuid": source_uuid(ref.source),
        "level": ref.level,
        "ops": meta.ops if meta.ops is not None else torch_ops(tree),
        "module_name": ref.path.stem if ref.path.name != REFERENCE_FILE else ref.path.parent.name,
        "name": ref.name,
        "problem_id": ref.problem_id,
        "category": meta.category,
        "description": meta.description,
    }
    return TaskRow.model_validate(
        {
            "data_source": data_source,
            "prompt": first_turn_messages(ref.source, entry_point, prompt_style),
            "ability": DEFAULT_ABILITY,
            "reward_model": {"ground_truth": ref.source, "style": "rule"},
            "extra_info": extra,
        }
    )
