"""OpenAI-compatible HTTP route of the policy: POST {route_prefix}/v1/chat/completions (and GET /v1/models).

Messages go through the checkpoint's chat template, the policy replicas generate (batched with the training
traffic), and the answer comes back in OpenAI's shape; `logprobs: true` adds each content token's log-prob
under the sampling distribution (serve_apps/policy_engine.py). `system_fingerprint` names the policy
version that produced the answer. `top_k` is an extension (0 = off); sampling defaults are the recipe's
(temperature 1, top_p 1, top_k 0), not OpenAI's. Unknown fields, streaming and top_logprobs > 0 are refused
with 422 rather than silently ignored. At most `http_max_inflight` generations run for HTTP at once (503
beyond), so HTTP users cannot crowd out rollouts. Auth is the verifier's bearer-token check
(serve_apps/auth.py, env var `api_token_env`); Serve listens on 127.0.0.1 unless the job says otherwise.

No `from __future__ import annotations`: FastAPI resolves the route annotations in the replica.
"""

import asyncio
import time
import uuid
from typing import Any, Literal

from fastapi import FastAPI, HTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from ray import serve
from ray.serve.handle import DeploymentHandle
from transformers import AutoTokenizer

from drkernel.config.train import PolicyConfig
from drkernel.types.sampling import GenerateOutput, SamplingParams
from serve_apps.auth import BearerAuth, tokens_from_env
from serve_apps.http_guard import BodyGuard, safe_errors

INGRESS_NAME = "PolicyIngress"
OPEN_PATHS = frozenset({"/healthz"})
BODY_TIMEOUT_S = 10.0
MAX_N = 16


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ChatMessage(_Strict):
    role: Literal["system", "user", "assistant"]
    content: str


class ChatRequest(_Strict):
    """The subset of OpenAI's chat-completions body this route honours; anything else is a 422."""

    messages: list[ChatMessage] = Field(..., min_length=1, description="the conversation so far")
    model: str | None = Field(None, description="must be the served model name when given")
    max_tokens: int | None = Field(None, ge=1, description="generation budget (default: 512)")
    max_completion_tokens: int | None = Field(None, ge=1, description="OpenAI's newer name for max_tokens")
    temperature: float = Field(1.0, ge=0, le=2, description="0 = greedy")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus threshold")
    top_k: int = Field(0, ge=0, description="extension: keep the k most likely tokens (0 = off)")
    n: int = Field(1, ge=1, le=MAX_N, description="choices to sample")
    seed: int | None = Field(None, description="sampling seed (choice i uses seed + i)")
    logprobs: bool = Field(False, description="return each content token's log-prob")
    top_logprobs: int | None = Field(None, ge=0, le=0, description="alternatives per token: not supported")
    stream: Literal[False] = Field(False, description="streaming is not supported")
    user: str | None = Field(None, description="ignored; accepted for OpenAI clients")


def _byte_level_table() -> dict[str, int]:
    """The byte-level BPE alphabet (GPT-2, Qwen, our tokenizer): printable bytes stand for themselves, the
    other 68 are shifted to code points 256+. Inverted, it gives a token's exact bytes."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1), *range(ord("\u00ae"), 256)]
    shifted = [b for b in range(256) if b not in kept]
    table = {chr(b): b for b in kept}
    table.update({chr(256 + i): b for i, b in enumerate(shifted)})
    return table


BYTE_OF = _byte_level_table()


def _json_error(status: int, detail: Any) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)


@serve.deployment(name=INGRESS_NAME)
@serve.ingress()
class PolicyIngress:
    """Chat template in, OpenAI-shaped choices out; generation is the policy replicas'."""

    def __init__(self, policy: DeploymentHandle, config: dict, model_path: str) -> None:
        self.config = PolicyConfig.model_validate(config)
        self._policy = policy
        self._tokenizer = AutoTokenizer.from_pretrained(model_path)
        self._tokens = tokens_from_env(self.config.api_token_env)
        self._added = set(self._tokenizer.added_tokens_decoder)  # special/added tokens are not byte-level pieces
        self._slots: asyncio.Semaphore | None = None  # made on the serving event loop

    def __serve_build_asgi_app__(self) -> Any:
        app = FastAPI(title="drkernel policy", version="0.1.0", docs_url=None, redoc_url=None)
        app.add_middleware(BodyGuard, max_body_bytes=self.config.http_max_body_bytes, body_timeout_s=BODY_TIMEOUT_S)
        prefix = self.config.route_prefix.rstrip("/")  # the ASGI path carries the app's route prefix
        app.add_middleware(BearerAuth, tokens=self._tokens, open_paths={prefix + p for p in OPEN_PATHS} | OPEN_PATHS)

        @app.exception_handler(RequestValidationError)
        async def invalid(_: Any, exc: RequestValidationError) -> JSONResponse:
            return _json_error(422, safe_errors(exc.errors()))

        @app.get("/healthz")
        async def healthz() -> dict:
            return {"status": "ok"}

        @app.get("/v1/models")
        async def models() -> dict:
            return {
                "object": "list",
                "data": [{"id": self.config.served_model_name, "object": "model", "owned_by": "drkernel"}],
            }

        @app.post("/v1/chat/completions")
        async def chat_completions(body: ChatRequest) -> dict:
            return await self._complete(body)

        return app

    async def _complete(self, body: ChatRequest) -> dict:
        if body.model is not None and body.model != self.config.served_model_name:
            raise HTTPException(
                404, f"model {body.model!r} is not served here; this route serves {self.config.served_model_name!r}"
            )
        messages = [m.model_dump() for m in body.messages]
        prompt = self._tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        prompt_ids = self._tokenizer.encode(prompt, add_special_tokens=False)
        budget = body.max_completion_tokens or body.max_tokens or 512
        samplings = [
            SamplingParams(
                temperature=body.temperature,
                top_p=body.top_p,
                top_k=body.top_k,
                max_new_tokens=budget,
                seed=None if body.seed is None else body.seed + i,
            )
            for i in range(body.n)
        ]
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.config.http_max_inflight)
        if self._slots.locked():
            raise HTTPException(
                503, "the policy is busy with other HTTP requests; retry later", headers={"Retry-After": "1"}
            )
        async with self._slots:
            try:
                outputs: list[GenerateOutput] = await asyncio.gather(
                    *(self._policy.generate.remote(prompt_ids, s) for s in samplings)
                )
            except ValueError as e:  # a request the engine refuses (e.g. longer than the model's context)
                detail = [{"loc": ["body", "messages"], "type": "value_error", "msg": str(e)}]
                raise HTTPException(422, detail) from None
        return self._response(body, prompt_ids, outputs)

    def _response(self, body: ChatRequest, prompt_ids: list[int], outputs: list[GenerateOutput]) -> dict:
        choices = []
        for i, out in enumerate(outputs):
            content_ids = out.token_ids[:-1] if out.finish_reason == "stop" else out.token_ids
            choice: dict[str, Any] = {
                "index": i,
                "message": {"role": "assistant", "content": self._tokenizer.decode(content_ids)},
                "logprobs": None,
                "finish_reason": "length" if out.finish_reason == "length" else "stop",
            }
            if body.logprobs:
                choice["logprobs"] = {
                    "content": [self._token_logprob(t, lp) for t, lp in zip(content_ids, out.logprobs)]
                }
            choices.append(choice)
        completion_tokens = sum(len(o.token_ids) for o in outputs)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.config.served_model_name,
            "system_fingerprint": f"policy-v{min(o.version for o in outputs)}",
            "choices": choices,
            "usage": {
                "prompt_tokens": len(prompt_ids),
                "completion_tokens": completion_tokens,
                "total_tokens": len(prompt_ids) + completion_tokens,
            },
        }

    def _token_logprob(self, token_id: int, logprob: float) -> dict:
        """OpenAI's per-token entry: `token` may show U+FFFD where a character spans tokens; `bytes` is exact."""
        piece = self._tokenizer.convert_ids_to_tokens(token_id)
        if token_id not in self._added and all(ch in BYTE_OF for ch in piece):
            raw = bytes(BYTE_OF[ch] for ch in piece)
        else:
            raw = self._tokenizer.decode([token_id]).encode("utf-8")
        return {"token": self._tokenizer.decode([token_id]), "logprob": logprob, "bytes": list(raw), "top_logprobs": []}
