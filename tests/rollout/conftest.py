"""Shared fixtures: the shipped tasks and a tiny ChatML tokenizer trained on a few of them (about a second)."""

from __future__ import annotations

import pytest

from drkernel.model.tokenizer import build_tokenizer
from drkernel.sft.data import corpus_texts, task_pairs
from drkernel.tasks import load_tasks


@pytest.fixture(scope="session")
def tasks() -> dict:
    return {t.name: t for t in load_tasks()}


@pytest.fixture(scope="session")
def tokenizer(tasks):
    picked = [tasks[name] for name in ("add", "relu", "abs", "elu")]
    return build_tokenizer(corpus_texts(task_pairs(picked)), vocab_size=1024)
