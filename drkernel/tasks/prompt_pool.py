"""The RL prompt pool of a task folder in a chosen first-turn style.

The shipped parquet carries the full (one-shot example) prompt; the demo's SFT warm start trains on compact
prompts, and RL must ask in the style the policy was warm-started on, so the job builds the pool it needs.
Rows are the same as `drkernel prepare-data --src TASKS --prompt-style STYLE` writes (stable uuids).
"""

from __future__ import annotations

from pathlib import Path

from drkernel.data.kernelbench import build_row, discover
from drkernel.data.reader import write_rows
from drkernel.tasks.loader import library_path


def build_prompt_pool(
    out: str | Path,
    tasks_dir: str | Path | None = None,
    style: str = "compact",
    data_source: str = "drkernel_tasks",
    categories: list[str] | None = None,
) -> Path:
    """Write the pool of `tasks_dir` (default: the shipped library) to `out`, only the tasks of `categories`
    when given (their task.yaml says); a broken task is an error."""
    refs, errors = discover(tasks_dir or library_path())
    if errors:
        raise ValueError(f"task folder {tasks_dir or library_path()}: {errors[0]}")
    if categories is not None:
        refs = [r for r in refs if r.meta is not None and r.meta.category in categories]
    if not refs:
        which = f" of categories {categories}" if categories is not None else ""
        raise ValueError(f"task folder {tasks_dir or library_path()} holds no tasks{which}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_rows([build_row(ref, data_source, style) for ref in refs], out)  # type: ignore[arg-type]
    return out
