"""The prompt pool: readers, prompt templates and KernelBench-folder conversion (the row itself is
drkernel.types.task_row)."""
