"""An OpenAI-compatible chat endpoint as the episode's `generate`: our policy app's route, vLLM's, anyone's.

The episode loop keeps its context as token ids (drkernel.rollout.tokens); a chat endpoint wants messages. The
ids are read back into messages through the ChatML markers (`<|im_start|>role\\n...<|im_end|>`) of a local
tokenizer, which serves only as the context's ledger, and the answer's text is encoded with it again (log-probs
0: nothing is trained on these). Text from the task, the candidate and the verifier is escaped before it enters
the context (drkernel.data.prompts.escape_special), so a marker inside a message can never split it. A 503 is
retried after its Retry-After; other HTTP errors raise and fail the sample (counted, not dropped).
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from drkernel.types.sampling import GenerateOutput, SamplingParams

START, END = "<|im_start|>", "<|im_end|>"
RETRIES_503 = 30


def messages_of(text: str) -> list[dict[str, str]]:
    """The ChatML conversation in `text`, which ends with an open assistant header (the generation prompt)."""
    pieces = text.split(START)
    if len(pieces) < 3 or pieces[-1].strip() != "assistant":
        raise ValueError("the context is not a ChatML conversation ending in an open assistant turn")
    messages = []
    for piece in pieces[1:-1]:
        role, sep, rest = piece.partition("\n")
        if not sep or END not in rest:
            raise ValueError(f"a ChatML message without role line or {END}")
        messages.append({"role": role.strip(), "content": rest.split(END)[0]})
    return messages


class ChatEndpoint:
    """`await endpoint(context_ids, sampling)` -> GenerateOutput, through POST {base}/v1/chat/completions."""

    def __init__(
        self, base_url: str, tokenizer: Any, model: str | None = None, token: str | None = None, timeout_s: float = 600
    ) -> None:
        base = base_url.rstrip("/")
        self.url = base if base.endswith("/chat/completions") else f"{base}/v1/chat/completions"
        self.model, self.tokenizer = model, tokenizer
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.end_id = tokenizer.convert_tokens_to_ids(END)

    async def __call__(self, context_ids: list[int], sampling: SamplingParams) -> GenerateOutput:
        messages = messages_of(self.tokenizer.decode(context_ids, skip_special_tokens=False))
        body: dict[str, Any] = {
            "messages": messages,
            "max_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
        }
        if sampling.top_k:
            body["top_k"] = sampling.top_k
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if self.model:
            body["model"] = self.model
        choice = (await self._post(body))["choices"][0]
        text = choice["message"]["content"] or ""
        ids = self.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        ids = ids[: sampling.max_new_tokens - (finish == "stop")]
        if finish == "stop":
            ids.append(self.end_id)
        return GenerateOutput(token_ids=ids, logprobs=[0.0] * len(ids), finish_reason=finish, version=0)

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        async with aiohttp.ClientSession(timeout=self.timeout, headers=self.headers) as session:
            for _ in range(RETRIES_503):
                async with session.post(self.url, json=body) as resp:
                    if resp.status == 503:
                        await asyncio.sleep(float(resp.headers.get("Retry-After", "1")))
                        continue
                    if resp.status != 200:
                        raise RuntimeError(f"{self.url} answered {resp.status}: {(await resp.text())[:300]}")
                    return await resp.json()
        raise RuntimeError(f"{self.url} stayed busy (503) through {RETRIES_503} retries")
