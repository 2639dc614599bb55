"""The shipped KernelBench-format task set: references plus Triton solutions of different quality."""

from drkernel.tasks.loader import (
    Task,
    TaskError,
    TaskMeta,
    library_parquet_path,
    library_path,
    load_task,
    load_tasks,
)

__all__ = ["Task", "TaskError", "TaskMeta", "library_parquet_path", "library_path", "load_task", "load_tasks"]
