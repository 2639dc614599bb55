"""The prompt pool: row schema, readers, prompt templates and KernelBench-folder conversion."""
