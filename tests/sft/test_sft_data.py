"""SFT examples: the response-only label mask, the task corpus, parquet input, padding."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from drkernel.data.prompts import extract_code
from drkernel.model.tokenizer import build_tokenizer
from drkernel.sft.data import (
    IGNORE_INDEX,
    ChatPair,
    SFTInputError,
    code_response,
    collate,
    encode_pair,
    encode_pairs,
    parquet_pairs,
    task_pairs,
)
from drkernel.tasks import load_tasks


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(["user assistant relu torch\n```python\nx = 1\n```"] * 3, vocab_size=300, min_frequency=1)


def test_hand_built_example_labels_only_the_response(tokenizer):
    pair = ChatPair([{"role": "user", "content": "relu"}], "```python\nx = 1\n```")
    ex = encode_pair(tokenizer, pair)
    prompt = tokenizer.encode("<|im_start|>user\nrelu<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
    response = tokenizer.encode("```python\nx = 1\n```", add_special_tokens=False)
    assert ex.input_ids == prompt + response + [tokenizer.eos_token_id]
    assert ex.labels == [IGNORE_INDEX] * len(prompt) + response + [tokenizer.eos_token_id]
    assert ex.num_response_tokens == len(response) + 1
    trained = [t for t in ex.labels if t != IGNORE_INDEX]
    assert tokenizer.decode(trained) == "```python\nx = 1\n```<|im_end|>"


def test_task_pairs_cover_every_solution_and_extract_back():
    tasks = load_tasks()
    pairs = task_pairs(tasks, style="compact")
    assert len(pairs) == sum(len(t.solutions) for t in tasks)
    by_source = {p.source: p for p in pairs}
    for task in tasks:
        for label, solution in task.solutions.items():
            pair = by_source[f"{task.name}/{label}"]
            assert pair.messages[0]["role"] == "user" and task.reference.strip("\n") in pair.messages[0]["content"]
            assert extract_code(pair.response) == solution.strip("\n")


def test_long_examples_are_dropped_and_named(tokenizer):
    short = ChatPair([{"role": "user", "content": "a"}], "b", "short")
    long = ChatPair([{"role": "user", "content": "a " * 200}], "b", "long")
    kept, dropped = encode_pairs(tokenizer, [short, long], max_length=64)
    assert [e.source for e in kept] == ["short"] and dropped == ["long"]


def test_collate_pads_right_and_masks_padding(tokenizer):
    a = encode_pair(tokenizer, ChatPair([{"role": "user", "content": "relu"}], "x"))
    b = encode_pair(tokenizer, ChatPair([{"role": "user", "content": "relu torch relu"}], "x = 1"))
    batch = collate([a, b], pad_id=tokenizer.pad_token_id)
    width = max(len(a.input_ids), len(b.input_ids))
    assert batch["input_ids"].shape == (2, width)
    short = 0 if len(a.input_ids) < width else 1
    n = len([a, b][short].input_ids)
    assert batch["attention_mask"][short, n:].sum() == 0 and batch["attention_mask"][short, :n].all()
    assert (batch["labels"][short, n:] == IGNORE_INDEX).all()
    assert (batch["input_ids"][short, n:] == tokenizer.pad_token_id).all()


def test_parquet_pairs_reads_chat_and_string_prompts(tmp_path):
    path = tmp_path / "sft.parquet"
    table = pa.table(
        {
            "prompt": ['[{"role": "user", "content": "write relu"}]', "plain prompt"],
            "response": [code_response("x = 1"), "y"],
        }
    )
    pq.write_table(table, path)
    pairs = parquet_pairs(path)
    assert pairs[0].messages == [{"role": "user", "content": "write relu"}]
    assert pairs[1].messages == [{"role": "user", "content": "plain prompt"}]
    assert pairs[0].response == "```python\nx = 1\n```"


def test_parquet_pairs_names_missing_columns_and_files(tmp_path):
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"prompt": ["p"]}), path)
    with pytest.raises(SFTInputError, match="response"):
        parquet_pairs(path)
    with pytest.raises(SFTInputError, match="not found"):
        parquet_pairs(tmp_path / "missing.parquet")
