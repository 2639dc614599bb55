"""A scripted engine and verifier for episode tests: real token ids of chosen responses, chosen verdicts.

The engine behaves like a real one where the episode depends on it: it honours the request's token budget
(cutting the response and reporting "length"), ends a finished response with the stop id, and gives every
sampled token its own log-prob so a shifted span shows up.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from drkernel.config.train import RolloutConfig
from drkernel.data.prompts import first_turn_messages
from drkernel.types.sampling import FinishReason, GenerateOutput, SamplingParams
from drkernel.types.task_row import TaskRow
from drkernel.types.verify_result import VerifyResult


def task_row(reference: str, entry_point: str = "Model", style: str = "compact") -> TaskRow:
    return TaskRow.model_validate(
        {
            "data_source": "test",
            "prompt": first_turn_messages(reference, entry_point, style),
            "reward_model": {"ground_truth": reference},
            "extra_info": {"entry_point": entry_point, "uuid": "t-1"},
        }
    )


def fenced(code: str, prose: str = "Here is the kernel.") -> str:
    return f"{prose}\n```python\n{code}\n```"


@dataclass
class Reply:
    """One scripted engine answer; `finish` 'stop' appends the stop id, 'length'/'abort' do not."""

    text: str
    version: int = 0
    finish: FinishReason = "stop"


@dataclass
class ScriptedEngine:
    tokenizer: Any
    replies: list[Reply]
    calls: list[tuple[list[int], SamplingParams]] = field(default_factory=list)
    outputs: list[GenerateOutput] = field(default_factory=list)

    async def __call__(self, prompt_ids: list[int], sampling: SamplingParams) -> GenerateOutput:
        self.calls.append((list(prompt_ids), sampling))
        await asyncio.sleep(0)
        reply = self.replies[len(self.calls) - 1]
        ids = self.tokenizer.encode(reply.text, add_special_tokens=False)
        finish = reply.finish
        if finish == "stop":
            ids = ids + [sampling.stop_token_ids[0]]
        if len(ids) > sampling.max_new_tokens:
            ids, finish = ids[: sampling.max_new_tokens], "length"
        base = sum(len(o.token_ids) for o in self.outputs)
        out = GenerateOutput(
            token_ids=ids,
            logprobs=[-(base + i + 1) / 1000 for i in range(len(ids))],
            finish_reason=finish,
            version=reply.version,
        )
        self.outputs.append(out)
        return out


@dataclass
class ScriptedVerifier:
    verdicts: list[VerifyResult]
    calls: list[tuple[str, str, str]] = field(default_factory=list)

    async def __call__(self, reference: str, candidate: str, entry_point: str) -> VerifyResult:
        self.calls.append((reference, candidate, entry_point))
        await asyncio.sleep(0)
        return self.verdicts[len(self.calls) - 1]


def ok(correct: bool = True, **kw: Any) -> VerifyResult:
    return VerifyResult(status="ok", compiled=True, correct=correct, **kw)


def rollout_cfg(**kw: Any) -> RolloutConfig:
    base = {
        "max_turns": 2,
        "max_new_tokens": 400,
        "max_context_tokens": 4096,
        "feedback_max_tokens": 200,
        "min_generation_tokens": 8,
    }
    return RolloutConfig.model_validate({**base, **kw})
