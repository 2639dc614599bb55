"""What an engine is asked and what it answers: the sampling request and the sampled ids with their log-probs.

Every engine (transformers, vLLM, vllm-ascend) takes and returns these, so engines, rollout workers and the
trainer can be swapped independently. Unknown keys are rejected, assignments validated, as in the configs.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

FinishReason = Literal["stop", "length", "abort"]


class SamplingParams(BaseModel):
    """How one response is sampled. Only temperature, top-k and top-p shape the distribution, so the
    engine's log-probs stay those of the policy the trainer recomputes (no other logits processor)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    temperature: float = Field(1.0, ge=0, description="softmax temperature; 0 = greedy")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus threshold (1 = off)")
    top_k: int = Field(0, ge=0, description="keep the k most likely tokens (0 = off)")
    max_new_tokens: int = Field(512, ge=1, description="generation budget of this response")
    stop_token_ids: list[int] = Field(default_factory=list, description="extra ids that end the response")
    seed: int | None = Field(None, description="per-request sampling seed (null = engine's generator)")


class GenerateOutput(BaseModel):
    """What an engine returns for one request: the sampled ids, each one's log-prob, and why it stopped."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    token_ids: list[int] = Field(..., description="sampled ids, the stop token included when one was sampled")
    logprobs: list[float] = Field(..., description="log-prob of each sampled id under the sampling distribution")
    finish_reason: FinishReason = Field(..., description="stop token, length budget, or aborted by a weight swap")
    version: int = Field(..., ge=0, description="policy version that produced every token of this output")
