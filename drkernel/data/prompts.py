"""The conversation protocol with the policy: the task prompt, reading the answer, the feedback turn.

Turn 1 is a single user message (no system prompt, as in the recipe). Later turns add a feedback
message built from the verifier's verdict. Unlike the recipe, which pastes the whole result as JSON
(tracebacks, profiler tables, the reward itself), the feedback here is a few structured lines held
to a character budget, so a long traceback cannot crowd the context window.

When a row already carries a prompt (the recipe's parquet), use that prompt: the released models were
trained on its exact text. These templates are for tasks we turn into rows ourselves.

Text is data, never control. Feedback quotes text the candidate controls (exception messages, kernel names,
its own output) and prompts quote the task's code; a chat template rendered with `tokenize=True` would turn
`<|im_end|>` or `<|im_start|>` inside that text into the real special-token ids, letting a candidate close
the user turn and forge an assistant or user turn of its own. `escape_special` breaks every special-token
string in such text with a zero-width space after its first character, so the tokenizer reads it as plain
characters (a human reader still sees the same text).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from drkernel.types.verify_result import VerifyResult

PromptStyle = Literal["full", "compact"]

_EXAMPLE_REFERENCE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.relu(a + b)


def get_inputs():
    return [torch.randn(4096), torch.randn(4096)]


def get_init_inputs():
    return []"""

_EXAMPLE_SOLUTION = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_relu_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(a + b, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        add_relu_kernel[(triton.cdiv(n, 1024),)](a, b, out, n, BLOCK=1024)
        return out"""

_FULL_TEMPLATE = """You are given a PyTorch model. Make it faster by writing custom Triton kernels for its \
operators, while keeping its outputs the same.

You choose what to replace: turn some operators into Triton kernels, fuse several operators into one \
kernel (for example a matmul together with its activation), or keep an operator in PyTorch when a \
kernel would not pay off. Algorithmic changes such as an online softmax are welcome. Every forward \
call must launch at least one of your @triton.jit kernels.

Example. For this architecture:

```python
{example_reference}
```

a good answer is:

```python
{example_solution}
```

Now the architecture to optimize (entry point `{entry_point}`):

```python
{reference}
```

Write `{entry_point}New`: an nn.Module that takes the same constructor arguments as `{entry_point}`, \
creates its parameters in the same order, and returns the same output (within 1e-2). Put every \
import and kernel it needs in the same code. Leave out tests, `get_inputs` and `get_init_inputs`. \
Reply with the complete code in one ```python block."""

_COMPACT_TEMPLATE = """Rewrite `{entry_point}` as `{entry_point}New` using Triton kernels \
(same constructor, same output, at least one @triton.jit kernel). Reply with one ```python block.

```python
{reference}
```"""

_FEEDBACK_HEAD = "Verifier feedback on your last implementation:"
_FEEDBACK_TAIL = (
    "Improve your implementation using this feedback. Reply with the complete `{new_name}` in one ```python block."
)
TRUNCATION_MARKER = "...[truncated]"
ESCAPE_MARK = "\u200b"  # zero-width space: splits a special-token string without changing what a reader sees
CHATML_SPECIALS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>")  # escaped whatever the tokenizer says


def special_strings(tokenizer: Any) -> list[str]:
    """Every string the tokenizer matches as one added token before normal tokenization (special tokens and
    other added tokens such as `<think>`), plus the ChatML markers; longest first."""
    found = set(CHATML_SPECIALS)
    if tokenizer is not None:
        found.update(getattr(tokenizer, "all_special_tokens", None) or [])
        found.update((tokenizer.get_added_vocab() if hasattr(tokenizer, "get_added_vocab") else {}).keys())
    return sorted((t for t in found if t), key=len, reverse=True)


def escape_special(text: str, specials: Iterable[str] = CHATML_SPECIALS) -> str:
    """`text` with each occurrence of a special-token string broken by ESCAPE_MARK after its first character.

    Repeats until no special string is left (breaking one occurrence can never form another: ESCAPE_MARK is
    in no special token), so text built to reassemble a marker after one pass is escaped too.
    """
    tokens = [t for t in specials if len(t) > 1 and ESCAPE_MARK not in t]
    if not tokens:
        return text
    pattern = re.compile("|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True)))
    while True:
        escaped = pattern.sub(lambda m: m.group(0)[0] + ESCAPE_MARK + m.group(0)[1:], text)
        if escaped == text:
            return text
        text = escaped


def first_turn_messages(
    reference_code: str, entry_point: str = "Model", style: PromptStyle = "full"
) -> list[dict[str, str]]:
    """The opening chat: one user message asking for `<entry_point>New` written with Triton.

    "full" is the KernelBench-style instruction with a worked example; "compact" is a two-line
    instruction for tiny models whose context and training budget are small.
    """
    if not reference_code.strip():
        raise ValueError("reference_code is empty")
    if style == "full":
        content = _FULL_TEMPLATE.format(
            example_reference=_EXAMPLE_REFERENCE,
            example_solution=_EXAMPLE_SOLUTION,
            entry_point=entry_point,
            reference=reference_code.strip("\n"),
        )
    elif style == "compact":
        content = _COMPACT_TEMPLATE.format(entry_point=entry_point, reference=reference_code.strip("\n"))
    else:
        raise ValueError(f"unknown prompt style {style!r}; choose 'full' or 'compact'")
    return [{"role": "user", "content": content}]


def _trim(text: str, limit: int) -> str:
    """Keep the head and the tail (a traceback's last lines name the actual error)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = (limit - len(TRUNCATION_MARKER)) // 3
    tail = limit - head - len(TRUNCATION_MARKER)
    return text[:head] + TRUNCATION_MARKER + text[len(text) - tail :]


def _yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def _summary_lines(result: VerifyResult) -> list[str]:
    """Short fixed-size lines: the verdict flags and the measurements."""
    if result.status == "infra_error":
        return ["status: the verifier could not evaluate this attempt (infrastructure problem)"]
    lines = [
        f"status: {'accepted' if result.correct and not result.hack else 'not accepted'}",
        f"compiled: {_yes_no(result.compiled)} | correct: {_yes_no(result.correct)} | hack: {result.hack or 'none'}",
    ]
    if result.speedup is not None:
        timing = f"speedup: {result.speedup:.2f}x"
        if result.ref_runtime_ms is not None and result.runtime_ms is not None:
            timing += f" (reference {result.ref_runtime_ms:.3f} ms, yours {result.runtime_ms:.3f} ms)"
        lines.append(timing)
    if result.coverage is not None:
        lines.append(f"triton coverage: {result.coverage:.0%} of device time is in your Triton kernels")
    return lines


def _detail_lines(result: VerifyResult) -> list[tuple[str, str]]:
    """(label, free text) pairs of unbounded length: the error and the first failed check."""
    details = []
    if result.error is not None:
        details.append((f"error ({result.error.kind}): ", result.error.message))
    failed = next((c for c in result.checks if not c.passed), None)
    if failed is not None:
        details.append((f"first failed check ({failed.name}): ", failed.detail or "failed"))
    return details


def _cut(text: str, limit: int) -> str:
    """Keep the start of `text`, ending in TRUNCATION_MARKER when something was cut."""
    if len(text) <= limit:
        return text
    return text[: limit - len(TRUNCATION_MARKER)] + TRUNCATION_MARKER


def _shares(details: list[tuple[str, str]], room: int) -> list[int]:
    """Split `room` so short details get all they need and long ones share the rest evenly."""
    sizes = [len(label) + len(text.strip()) + 1 for label, text in details]
    shares = [0] * len(details)
    for k, i in enumerate(sorted(range(len(details)), key=sizes.__getitem__)):
        shares[i] = min(sizes[i], room // (len(details) - k))
        room -= shares[i]
    return shares


def min_feedback_chars(entry_point: str = "Model") -> int:
    """The smallest character budget feedback_message accepts: the closing instruction, the head line and room
    for two truncation markers."""
    tail = _FEEDBACK_TAIL.format(new_name=f"{entry_point}New")
    return len(tail) + 1 + len(_FEEDBACK_HEAD) + 2 * len(TRUNCATION_MARKER)


def feedback_message(
    result: VerifyResult | Mapping[str, Any],
    budget_chars: int = 1500,
    entry_point: str = "Model",
    specials: Iterable[str] = CHATML_SPECIALS,
) -> dict[str, str]:
    """The next user turn after a verdict, never longer than `budget_chars` characters.

    The closing instruction always survives. Then come the summary lines (status,
    compiled/correct/hack, speedup, coverage); the error message and the first failed check share
    whatever room is left, each trimmed around TRUNCATION_MARKER so the model (and a reader) can
    tell that text is missing. Every special-token string of `specials` in the free text is escaped
    (escape_special) before it is measured, so the escaped text fits the budget too.
    """
    verdict = result if isinstance(result, VerifyResult) else VerifyResult.model_validate(result)
    tail = _FEEDBACK_TAIL.format(new_name=f"{entry_point}New")
    if budget_chars < min_feedback_chars(entry_point):
        raise ValueError(f"budget_chars={budget_chars} is too small; need at least {min_feedback_chars(entry_point)}")
    room = budget_chars - len(tail) - 1
    summary = [escape_special(line, specials) for line in _summary_lines(verdict)]
    body = _cut("\n".join([_FEEDBACK_HEAD, *summary]), room)
    details = [(label, escape_special(text, specials)) for label, text in _detail_lines(verdict)]
    room -= len(body) + len(TRUNCATION_MARKER) + 1  # kept for the marker of a dropped line
    dropped = False
    for (label, text), share in zip(details, _shares(details, room), strict=True):
        share -= 1  # the newline before the line
        text = text.strip().replace("\r", "")
        if len(label) + len(text) > share and share < len(label) + len(TRUNCATION_MARKER) + 8:
            dropped = True
            continue
        body += "\n" + label + _trim(text, share - len(label))
    if dropped and not body.endswith(TRUNCATION_MARKER):
        body += "\n" + TRUNCATION_MARKER
    return {"role": "user", "content": f"{body}\n{tail}"}


_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.MULTILINE | re.DOTALL)


def extract_code(response_text: str) -> str | None:
    """The kernel code in a policy response, by the recipe's rule.

    Order: the last ```answer block; else the last fenced code block of any language. Only closed
    fences count, so a response cut off mid-block yields no code. Returns None when no block is
    found; the caller then scores the turn as a failed attempt (no code) and says so in the feedback,
    instead of sending the whole response to the verifier as the recipe's reward client does.
    """
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(response_text)]
    if not blocks:
        return None
    answers = [body for lang, body in blocks if lang == "answer"]
    code = answers[-1] if answers else blocks[-1][1]
    return code.strip("\n") or None
