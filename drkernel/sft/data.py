"""SFT examples: a chat prompt plus one assistant response, tokenized with prompt labels masked.

Prompt and response are tokenized separately and concatenated, so the prompt/response boundary is
exact and only the response tokens (and the closing eos) carry a label; every prompt token is
labelled IGNORE_INDEX and never trained on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase

from drkernel.data.prompts import first_turn_messages

IGNORE_INDEX = -100

Messages = list[dict[str, str]]


class SFTInputError(ValueError):
    """SFT input that cannot be used (missing file, wrong columns, no examples, no chat template)."""


@dataclass(frozen=True)
class ChatPair:
    """One training pair before tokenization."""

    messages: Messages
    response: str
    source: str = ""


@dataclass(frozen=True)
class SFTExample:
    """Token ids and labels of one pair; `labels[i]` is IGNORE_INDEX for every prompt token."""

    input_ids: list[int]
    labels: list[int]
    source: str = ""

    @property
    def num_response_tokens(self) -> int:
        return sum(label != IGNORE_INDEX for label in self.labels)


def code_response(solution: str) -> str:
    """The assistant reply for a solution: the code in one python fence."""
    return "```python\n" + solution.strip("\n") + "\n```"


def task_pairs(tasks: Sequence, style: str = "compact") -> list[ChatPair]:
    """One pair per (task, solution) of the task library, in task then label order."""
    pairs = []
    for task in tasks:
        messages = first_turn_messages(task.reference, entry_point="Model", style=style)
        for label, solution in sorted(task.solutions.items()):
            pairs.append(ChatPair(messages, code_response(solution), f"{task.name}/{label}"))
    return pairs


def _as_messages(value, where: str) -> Messages:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = [{"role": "user", "content": value}]
    if not isinstance(value, (list, tuple)) or not value:
        raise SFTInputError(f"{where}: prompt must be a non-empty chat list or a string")
    messages = []
    for m in value:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise SFTInputError(f"{where}: every prompt message needs string 'role' and 'content'")
        messages.append({"role": m["role"], "content": m["content"]})
    return messages


def parquet_pairs(path: str | Path, prompt_key: str = "prompt", response_key: str = "response") -> list[ChatPair]:
    """Pairs from a parquet file with a chat-list (or JSON / plain string) prompt and a string response."""
    import pyarrow.parquet as pq

    p = Path(path)
    if not p.is_file():
        raise SFTInputError(f"SFT file not found: {p}")
    table = pq.read_table(p)
    missing = {prompt_key, response_key} - set(table.column_names)
    if missing:
        raise SFTInputError(f"SFT file {p} lacks column(s) {sorted(missing)}; it has {table.column_names}")
    pairs = []
    for i, row in enumerate(table.select([prompt_key, response_key]).to_pylist()):
        response = row[response_key]
        if not isinstance(response, str) or not response:
            raise SFTInputError(f"{p} row {i}: response must be a non-empty string")
        pairs.append(ChatPair(_as_messages(row[prompt_key], f"{p} row {i}"), response, f"row{i}"))
    return pairs


def corpus_texts(pairs: Sequence[ChatPair]) -> list[str]:
    """The text a tokenizer should be trained on: every prompt message and every response."""
    texts = []
    for pair in pairs:
        texts.extend(m["content"] for m in pair.messages)
        texts.append(pair.response)
    return texts


def prompt_ids(tokenizer: PreTrainedTokenizerBase, messages: Messages) -> list[int]:
    """Token ids of the chat prompt, ending with the assistant header (generation prompt)."""
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer.encode(text, add_special_tokens=False)


def encode_pair(tokenizer: PreTrainedTokenizerBase, pair: ChatPair) -> SFTExample:
    """Tokenize a pair; the response ends with eos so the model learns to stop."""
    if tokenizer.eos_token_id is None:
        raise SFTInputError("the tokenizer has no eos token; SFT needs one to end responses")
    prompt = prompt_ids(tokenizer, pair.messages)
    response = tokenizer.encode(pair.response, add_special_tokens=False) + [tokenizer.eos_token_id]
    return SFTExample(prompt + response, [IGNORE_INDEX] * len(prompt) + response, pair.source)


def encode_pairs(
    tokenizer: PreTrainedTokenizerBase, pairs: Sequence[ChatPair], max_length: int
) -> tuple[list[SFTExample], list[str]]:
    """Encode all pairs; those longer than `max_length` are left out and their sources returned."""
    kept, dropped = [], []
    for pair in pairs:
        example = encode_pair(tokenizer, pair)
        (kept if len(example.input_ids) <= max_length else dropped).append(example)
    return kept, [e.source for e in dropped]


def collate(examples: Sequence[SFTExample], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad a micro-batch; padding is masked out of attention and labelled IGNORE_INDEX."""
    width = max(len(e.input_ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE_INDEX, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for row, e in enumerate(examples):
        n = len(e.input_ids)
        ids[row, :n] = torch.tensor(e.input_ids)
        labels[row, :n] = torch.tensor(e.labels)
        mask[row, :n] = 1
    return {"input_ids": ids, "labels": labels, "attention_mask": mask}
