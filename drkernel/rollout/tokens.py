"""The growing token stream of one episode, kept by verl's continuous-token builder.

Sampled ids go into the stream exactly as the engine returned them (never decoded and re-encoded), so the
trainer's log-probs are taken on the very tokens the policy sampled. Only the messages we add (feedback) are
rendered, through the chat template, and get mask 0 and log-prob 0.0, as do the boundary tokens the builder
inserts (Qwen's `\\n` after `<|im_end|>`) and the `<|im_end|>` we add to close a turn the length budget cut.

Every append is planned first (`plan_feedback` returns what would be added, without changing the stream) so
the episode can decide whether it still fits the context before committing it: nothing is ever left-truncated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verl.utils.tokenizer.continuous_token import MergeResult
from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

Message = dict[str, str]


@dataclass(frozen=True)
class PlannedContext:
    """Context tokens that appending a user message would add: the merge result and the message list after it."""

    merge: MergeResult
    messages: list[Message]
    base_len: int  # stream length the plan was made on (a plan is only valid on that stream)
    closes_turn: bool  # an `<|im_end|>` goes first: the last turn was cut by its length budget
    added: int  # tokens the stream grows by (closing token, boundary tokens, the message, the next header)


class TokenStream:
    """Prompt ids plus the aligned response arrays (ids, mask, log-probs) of one multi-turn episode."""

    def __init__(self, tokenizer: Any, messages: list[Message], model_type: str = "qwen3"):
        self._builder = create_continuous_token_builder(tokenizer, hf_model_type=model_type)
        self._end_id = _turn_end_id(tokenizer)
        self.messages: list[Message] = [dict(m) for m in messages]
        self.prompt_ids: list[int] = list(self._builder.build_initial_tokens(self.messages))
        self._ids: list[int] = list(self.prompt_ids)  # prompt + response, the builder's runtime stream
        self.mask: list[int] = []
        self.logprobs: list[float] = []

    @property
    def context_ids(self) -> list[int]:
        """What the policy is conditioned on next: prompt + everything after it."""
        return list(self._ids)

    @property
    def response_ids(self) -> list[int]:
        return self._ids[len(self.prompt_ids) :]

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def stop_token_ids(self) -> list[int]:
        return [self._end_id]

    def append_assistant(self, token_ids: list[int], logprobs: list[float], text: str) -> tuple[int, int]:
        """Append sampled ids as they are (mask 1, their log-probs); returns the turn's span [start, end)."""
        if len(token_ids) != len(logprobs):
            raise ValueError(f"engine returned {len(token_ids)} token ids but {len(logprobs)} log-probs")
        merge = self._builder.merge_assistant_tokens(self._ids, list(token_ids))
        self._commit(merge, assistant_logprobs=[float(x) for x in logprobs])
        end = len(self.mask)
        start = end - merge.appended_token_count
        if self._ids[len(self.prompt_ids) + start :] != list(token_ids):
            raise RuntimeError("the token builder changed sampled ids; refusing to train on re-tokenised text")
        self.messages.append({"role": "assistant", "content": text})
        return start, end

    def plan_feedback(self, message: Message) -> PlannedContext:
        """What appending `message` as the next user turn (plus the next assistant header) would add."""
        closes = self.messages[-1]["role"] == "assistant" and self._ids[-1] != self._end_id
        base = self._ids + [self._end_id] if closes else self._ids
        updated = self.messages + [dict(message)]
        merge = self._builder.merge_context_tokens(self.messages, updated, base)
        return PlannedContext(merge, updated, len(self._ids), closes, len(merge.token_ids) - len(self._ids))

    def append_feedback(self, planned: PlannedContext) -> None:
        """Commit a planned user turn: every added token gets mask 0 and log-prob 0.0."""
        if planned.base_len != len(self._ids):
            raise RuntimeError("a feedback plan was committed on a stream that changed after it was made")
        if planned.closes_turn:
            self._commit(MergeResult(token_ids=self._ids + [self._end_id], appended_token_count=1, kind="context"))
        self._commit(planned.merge)
        self.messages = planned.messages

    def _commit(self, merge: MergeResult, assistant_logprobs: list[float] | None = None) -> None:
        if merge.removed_prefix_token_count:
            raise RuntimeError("the token builder dropped tokens already in the stream; sampled ids would change")
        self.mask, logprobs = self._builder.align_response_metadata(
            merge, self.mask, self.logprobs, assistant_logprobs=assistant_logprobs
        )
        self.logprobs = list(logprobs or [])
        self._ids = list(merge.token_ids)
        if len(self._ids) - len(self.prompt_ids) != len(self.mask) or len(self.mask) != len(self.logprobs):
            raise RuntimeError(
                f"token stream out of step: {len(self._ids) - len(self.prompt_ids)} response ids, "
                f"{len(self.mask)} mask, {len(self.logprobs)} log-probs"
            )


def _turn_end_id(tokenizer: Any) -> int:
    """The id that ends an assistant turn in ChatML (`<|im_end|>`), else the tokenizer's eos."""
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(im_end, int) and tokenizer.convert_ids_to_tokens(im_end) == "<|im_end|>":
        return im_end
    if tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has neither <|im_end|> nor an eos token; a turn could never end")
    return int(tokenizer.eos_token_id)
