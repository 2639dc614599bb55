"""Prompt templates, the budgeted feedback turn and code extraction."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from drkernel.data.prompts import TRUNCATION_MARKER, extract_code, feedback_message, first_turn_messages
from drkernel.types.verify_result import CheckRecord, ErrorInfo, VerifyResult

RELU = (Path(__file__).resolve().parents[2] / "drkernel/tasks/library/relu/reference.py").read_text()


def test_full_prompt_carries_task_example_and_contract():
    [msg] = first_turn_messages(RELU, style="full")
    assert msg["role"] == "user"
    text = msg["content"]
    assert RELU.strip("\n") in text and "@triton.jit" in text and "`ModelNew`" in text
    assert text.count("```python\n") == 3  # example reference, example answer, the task
    blocks = [b for _, b in re.findall(r"```(\w*)\n(.*?)```", text, flags=re.DOTALL)]
    for block in blocks:
        ast.parse(block)  # the example and the task are valid Python


def test_compact_prompt_is_short_and_names_the_entry_point():
    [msg] = first_turn_messages(RELU, entry_point="Net", style="compact")
    overhead = len(msg["content"]) - len(RELU.strip("\n"))
    assert overhead < 250
    assert "`NetNew`" in msg["content"] and RELU.strip("\n") in msg["content"]
    assert len(first_turn_messages(RELU, style="full")[0]["content"]) > len(msg["content"]) + 1000


def test_prompt_rejects_bad_input():
    with pytest.raises(ValueError, match="empty"):
        first_turn_messages("  \n")
    with pytest.raises(ValueError, match="unknown prompt style"):
        first_turn_messages(RELU, style="verbose")


def mismatch_result(message_lines=1000):
    return VerifyResult(
        compiled=True,
        correct=False,
        speedup=0.8,
        runtime_ms=1.25,
        ref_runtime_ms=1.0,
        coverage=0.5,
        error=ErrorInfo(
            kind="output_mismatch", message="Traceback\n" + "  frame\n" * message_lines + "AssertionError: boom"
        ),
        checks=[
            CheckRecord(name="load", passed=True),
            CheckRecord(name="correctness", passed=False, detail="seed 1: max abs diff 0.31 at index (2, 5)"),
        ],
        details={"profile": "x" * 100_000},
    )


def test_feedback_is_structured_and_not_a_dump():
    msg = feedback_message(mismatch_result(message_lines=3), budget_chars=1500)
    text = msg["content"]
    assert msg["role"] == "user"
    assert "status: not accepted" in text
    assert "compiled: yes | correct: no | hack: none" in text
    assert "speedup: 0.80x (reference 1.000 ms, yours 1.250 ms)" in text
    assert "triton coverage: 50%" in text
    assert "error (output_mismatch):" in text and "AssertionError: boom" in text
    assert "first failed check (correctness): seed 1: max abs diff 0.31 at index (2, 5)" in text
    assert "xxxx" not in text and TRUNCATION_MARKER not in text
    assert text.rstrip().endswith("```python block.")


@pytest.mark.parametrize("budget", [200, 350, 600, 1000, 1500, 4000])
def test_feedback_respects_the_budget_and_marks_cuts(budget):
    text = feedback_message(mismatch_result(), budget_chars=budget)["content"]
    assert len(text) <= budget
    assert TRUNCATION_MARKER in text  # the 1000-line traceback never fits
    assert "`ModelNew`" in text  # the instruction survives every budget


def test_feedback_keeps_the_traceback_tail_and_the_mismatch_when_room_allows():
    text = feedback_message(mismatch_result(), budget_chars=800)["content"]
    assert "AssertionError: boom" in text
    assert "seed 1: max abs diff 0.31 at index (2, 5)" in text


def test_feedback_from_a_dict_infra_and_hack():
    infra = feedback_message({"status": "infra_error", "error": {"kind": "infra", "message": "worker lost"}})
    assert "could not evaluate" in infra["content"] and "worker lost" in infra["content"]
    hack = feedback_message({"compiled": True, "correct": True, "hack": "decoy_kernel"}, entry_point="Net")
    assert "status: not accepted" in hack["content"] and "hack: decoy_kernel" in hack["content"]
    assert "`NetNew`" in hack["content"]
    with pytest.raises(ValueError, match="too small"):
        feedback_message({"compiled": True}, budget_chars=50)


def test_extract_prefers_the_last_answer_block():
    text = "```answer\nfirst\n```\nthinking\n```python\nother\n```\n```answer\nfinal\n```\n```text\nnotes\n```"
    assert extract_code(text) == "final"


def test_extract_takes_the_last_fenced_block_of_any_language():
    text = "Plan:\n```python\ndraft = 1\n```\nBetter:\n```py\nimport triton\nx = 2\n```\nDone."
    assert extract_code(text) == "import triton\nx = 2"
    assert extract_code("```\nplain\n```") == "plain"


def test_extract_returns_none_without_a_closed_block():
    assert extract_code("no code here") is None
    assert extract_code("```python\nclass ModelNew: ...  # cut off by max_tokens") is None
    assert extract_code("```python\n\n```") is None
