"""The locally trained tokenizer: exact round trips, ChatML template, determinism, HF loading."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from drkernel.data.prompts import first_turn_messages
from drkernel.model.tokenizer import IM_END, IM_START, PAD, build_tokenizer
from drkernel.sft.data import corpus_texts, task_pairs
from drkernel.tasks import load_tasks


@pytest.fixture(scope="module")
def tasks():
    return load_tasks()


@pytest.fixture(scope="module")
def tokenizer(tasks):
    return build_tokenizer(corpus_texts(task_pairs(tasks)), vocab_size=2048)


def test_every_solution_and_reference_round_trips(tasks, tokenizer):
    for task in tasks:
        for source in [task.reference, *task.solutions.values()]:
            ids = tokenizer.encode(source, add_special_tokens=False)
            assert tokenizer.decode(ids) == source, task.name


@pytest.mark.parametrize("text", ["\tx  = 1\r\n", "naïve 漢字 🙂", "   \n\n\t\t", "a<b>c{{}}"])
def test_unseen_bytes_round_trip(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text


def test_special_tokens_are_single_ids(tokenizer):
    for token in (PAD, IM_START, IM_END):
        ids = tokenizer.encode(token, add_special_tokens=False)
        assert ids == [tokenizer.convert_tokens_to_ids(token)]
    assert tokenizer.eos_token == IM_END
    assert tokenizer.pad_token == PAD
    assert len({tokenizer.convert_tokens_to_ids(t) for t in (PAD, IM_START, IM_END)}) == 3


def test_chat_template_is_chatml(tokenizer):
    messages = [{"role": "user", "content": "write relu"}, {"role": "assistant", "content": "ok"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    assert text == "<|im_start|>user\nwrite relu<|im_end|>\n<|im_start|>assistant\nok<|im_end|>\n"
    prompt = tokenizer.apply_chat_template(messages[:1], add_generation_prompt=True, tokenize=False)
    assert prompt.endswith("<|im_end|>\n<|im_start|>assistant\n")


def test_same_corpus_gives_same_vocabulary(tasks, tokenizer):
    again = build_tokenizer(corpus_texts(task_pairs(tasks)), vocab_size=2048)
    assert again.get_vocab() == tokenizer.get_vocab()
    smaller = build_tokenizer(corpus_texts(task_pairs(tasks)), vocab_size=512)
    assert len(smaller) == 512


def test_saved_tokenizer_loads_with_autotokenizer(tmp_path, tasks, tokenizer):
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    messages = first_turn_messages(tasks[0].reference, style="compact")
    assert loaded.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) == (
        tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    )
    solution = next(iter(tasks[0].solutions.values()))
    assert loaded.encode(solution, add_special_tokens=False) == tokenizer.encode(solution, add_special_tokens=False)
    assert loaded.eos_token_id == tokenizer.eos_token_id


def test_too_small_vocab_is_rejected():
    with pytest.raises(ValueError, match="vocab_size"):
        build_tokenizer(["abc"], vocab_size=100)
