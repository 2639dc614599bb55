"""Fixed answers in place of a model, to check the verifier and the metrics on known kernels: a task's own
reference renamed to `<entry>New` (KernelBench's references against themselves: speedup about 1, so fast@0 should
be 1 and fast@1 a coin toss), or a solution file shipped with the task (`solution_<label>.py`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from drkernel.types.sampling import GenerateOutput, SamplingParams


def reference_answer(source: str, entry_point: str) -> str:
    """The reference with its entry point renamed (`super(Model, self)` and all): a candidate that is the task."""
    return re.sub(rf"\b{re.escape(entry_point)}\b", f"{entry_point}New", source)


def solution_answer(tasks_dir: str | Path, name: str, label: str) -> str:
    path = Path(tasks_dir) / name / f"solution_{label}.py"
    if not path.is_file():
        raise FileNotFoundError(f"task {name} has no {path.name} in {tasks_dir}")
    return path.read_text()


class FixedAnswer:
    """A `generate` that always answers with one code block (token ids of the ledger tokenizer, log-probs 0)."""

    def __init__(self, tokenizer: Any, code: str) -> None:
        end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        text = f"```python\n{code.strip()}\n```"
        self.ids = [*tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True), end]

    async def __call__(self, context_ids: list[int], sampling: SamplingParams) -> GenerateOutput:
        if len(self.ids) > sampling.max_new_tokens:
            ids = self.ids[: sampling.max_new_tokens]
            return GenerateOutput(token_ids=ids, logprobs=[0.0] * len(ids), finish_reason="length", version=0)
        return GenerateOutput(token_ids=list(self.ids), logprobs=[0.0] * len(self.ids), finish_reason="stop", version=0)
