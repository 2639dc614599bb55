"""One multi-turn episode: generate, extract the kernel, verify, feed back, until T turns or the context is full.

`generate` and `verify` are injected async callables (the rollout worker passes the policy and verifier
deployments; tests pass local ones), so this loop has no Ray in it. Token bookkeeping is drkernel.rollout.tokens:
sampled ids are kept as sampled, feedback tokens carry mask 0 and log-prob 0.0.

Where the issue is silent, the episode does this (and why):
- A response without a closed code block (also one the length budget cut mid-block) is a format failure: reward
  0, nothing sent to the verifier, and the feedback says so. The episode goes on (a later turn may recover, which
  multi-turn training is for) unless `rollout.end_on_format_error`.
- An infra_error verdict masks its turn (never scored, never trained) and ends the episode: the next turn would be
  conditioned on feedback that says nothing about the kernel.
- No feedback follows the last turn: nobody answers it, it would only lengthen the training row.
- The context must hold the next feedback plus `rollout.min_generation_tokens`, else the episode ends
  ("context_full"); a turn may generate min(max_new_tokens, room left). Nothing is ever left-truncated. A prompt
  that leaves no room at all is an error (the prompt stream's length filter should have dropped it).
- An output aborted by a weight swap is re-submitted with its partial tokens appended (verl's resume loop); the
  turn keeps its oldest and newest policy version.
- With `rollout.seed` set, each turn's sampling seed is derived from (seed, group id, sample index, turn), so two
  runs with equal weights and equal prompts draw equal samples (a learning-rate-0 control then differs from its
  RL arm only by what training changed), and a group's samples still differ from each other.
- An exception from `generate` or `verify` propagates: the rollout worker decides (retry, fail the group). The
  episode awaits its callables directly and starts no task of its own, so nothing is left running.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from drkernel.config.train import RolloutConfig
from drkernel.data.prompts import (
    PromptStyle,
    escape_special,
    extract_code,
    feedback_message,
    first_turn_messages,
    min_feedback_chars,
    special_strings,
)
from drkernel.rl.rewards import RewardConfig, score
from drkernel.rollout.tokens import TokenStream
from drkernel.types.sampling import FinishReason, GenerateOutput, SamplingParams
from drkernel.types.task_row import TaskRow
from drkernel.types.trajectory import EndReason, Trajectory, Turn
from drkernel.types.verify_result import ErrorInfo, VerifyResult

GenerateFn = Callable[[list[int], SamplingParams], Awaitable[GenerateOutput]]
VerifyFn = Callable[[str, str, str], Awaitable[VerifyResult]]  # (reference, candidate, entry_point)

NO_CODE_MESSAGE = "your reply has no closed ```python code block, so nothing was verified"
CUT_OFF_MESSAGE = "your reply hit the length limit before its code block was closed, so nothing was verified"


@dataclass
class _Sample:
    """One assistant response, possibly assembled from several engine calls (aborted by weight swaps)."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason
    oldest: int
    newest: int
    resumes: int
    generate_s: float


def first_messages(task: TaskRow, prompt_style: PromptStyle | None = None) -> list[dict[str, Any]]:
    """The row's own prompt, or (with a style) the first turn rebuilt from the row's reference in that style."""
    if prompt_style is None:
        return [m.model_dump(mode="json") for m in task.prompt]
    return first_turn_messages(task.reference_code, task.entry_point, prompt_style)


def budgeted_feedback(verdict: VerifyResult, entry_point: str, tokenizer: Any, max_tokens: int) -> dict[str, str]:
    """feedback_message held to `max_tokens` tokens of content, whatever its text: the character budget is
    bisected between the shortest message feedback_message can write and 4 characters a token, so text that
    is token-dense (a few characters a token, or several tokens a character) only shortens the free text.
    Special-token strings in the text are escaped (prompts.escape_special) for this tokenizer."""
    specials = special_strings(tokenizer)

    def fit(chars: int) -> tuple[dict[str, str], bool]:
        message = feedback_message(verdict, chars, entry_point, specials)
        return message, len(tokenizer.encode(message["content"], add_special_tokens=False)) <= max_tokens

    lo = min_feedback_chars(entry_point)
    hi = max(4 * max_tokens, lo)
    message, fits = fit(hi)
    if fits:
        return message
    best, fits = fit(lo)
    if not fits:
        raise ValueError(
            f"rollout.feedback_max_tokens={max_tokens} cannot hold the shortest feedback message "
            f"(its closing instruction and summary alone are longer); raise it"
        )
    while hi - lo > 1:  # invariant: the budget lo fits, hi does not
        mid = (lo + hi) // 2
        message, fits = fit(mid)
        if fits:
            lo, best = mid, message
        else:
            hi = mid
    return best


def format_failure(finish_reason: FinishReason) -> VerifyResult:
    """The verdict the feedback reports for a response with no closed code block (never sent to the verifier)."""
    message = CUT_OFF_MESSAGE if finish_reason == "length" else NO_CODE_MESSAGE
    return VerifyResult(status="ok", compiled=False, correct=False, error=ErrorInfo(kind="syntax", message=message))


def sample_seed(seed: int | None, group_id: str, sample_index: int, turn: int) -> int | None:
    """The sampling seed of one turn (None when the rollout is unseeded): a hash, so nearby ids share nothing."""
    if seed is None:
        return None
    digest = hashlib.blake2b(f"{seed}/{group_id}/{sample_index}/{turn}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1  # below 2**63: every engine takes it


async def _sample(
    generate: GenerateFn, context: list[int], budget: int, stops: list[int], cfg: RolloutConfig, seed: int | None
) -> _Sample:
    """Generate one response of at most `budget` tokens, re-submitting after aborts with the tokens so far (a
    resumed request gets the next seed: its continuation must not replay the aborted draw)."""
    ids: list[int] = []
    logprobs: list[float] = []
    versions: list[int] = []
    elapsed = 0.0
    for resume in range(cfg.max_abort_resumes + 1):
        params = SamplingParams(
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            top_k=cfg.top_k,
            max_new_tokens=budget - len(ids),
            stop_token_ids=stops,
            seed=None if seed is None else (seed + resume) % 2**63,
        )
        t0 = time.perf_counter()
        out = await generate(context + ids, params)
        elapsed += time.perf_counter() - t0
        if not isinstance(out, GenerateOutput):
            out = GenerateOutput.model_validate(out)
        if len(out.token_ids) != len(out.logprobs):
            raise ValueError(f"engine returned {len(out.token_ids)} token ids but {len(out.logprobs)} log-probs")
        if len(out.token_ids) > params.max_new_tokens:
            raise ValueError(f"engine returned {len(out.token_ids)} tokens for a budget of {params.max_new_tokens}")
        ids += out.token_ids
        logprobs += out.logprobs
        versions.append(out.version)
        finish = out.finish_reason
        if finish == "abort" and len(ids) >= budget:
            finish = "length"
        if finish != "abort":
            return _Sample(ids, logprobs, finish, min(versions), max(versions), resume, elapsed)
    raise RuntimeError(
        f"generation was aborted {cfg.max_abort_resumes + 1} times in a row (weight swaps); giving this episode up"
    )


async def run_episode(
    task: TaskRow,
    group_id: str,
    sample_index: int,
    generate: GenerateFn,
    verify: VerifyFn,
    tokenizer: Any,
    cfg: RolloutConfig,
    reward_cfg: RewardConfig,
    prompt_style: PromptStyle | None = None,
) -> Trajectory:
    """Up to cfg.max_turns turns of generate -> extract -> verify -> feedback; see the module docstring.

    prompt_style None uses the row's prompt (the pool is built in the style the policy was warm-started on);
    "full"/"compact" rebuild the first turn from the row's reference.
    """
    t_start = time.perf_counter()
    specials = special_strings(tokenizer)  # the task's text is data too: no special token may hide in it
    opening = [{**m, "content": escape_special(m["content"], specials)} for m in first_messages(task, prompt_style)]
    stream = TokenStream(tokenizer, opening, cfg.chat_model_type)
    if len(stream) + cfg.min_generation_tokens > cfg.max_context_tokens:
        raise ValueError(
            f"task {task.task_uuid}: prompt is {len(stream)} tokens, which leaves less than "
            f"rollout.min_generation_tokens={cfg.min_generation_tokens} of "
            f"rollout.max_context_tokens={cfg.max_context_tokens}"
        )
    traj = Trajectory(
        group_id=group_id, sample_index=sample_index, task_uid=task.task_uuid, prompt_ids=list(stream.prompt_ids)
    )
    stats = dict.fromkeys(
        (
            "generate_s",
            "verify_s",
            "verify_wait_s",
            "verify_calls",
            "format_failures",
            "infra_errors",
            "aborts",
            "generated_tokens",
            "feedback_tokens",
        ),
        0.0,
    )
    end_reason: EndReason | None = None
    for index in range(cfg.max_turns):
        budget = min(cfg.max_new_tokens, cfg.max_context_tokens - len(stream))
        seed = sample_seed(cfg.seed, group_id, sample_index, index)
        sample = await _sample(generate, stream.context_ids, budget, stream.stop_token_ids, cfg, seed)
        stats["generate_s"] += sample.generate_s
        stats["aborts"] += sample.resumes
        text = tokenizer.decode(sample.token_ids, skip_special_tokens=True)
        start, end = stream.append_assistant(sample.token_ids, sample.logprobs, text)
        stats["generated_tokens"] += end - start
        code = extract_code(text)
        turn = Turn(
            index=index,
            start=start,
            end=end,
            policy_version=sample.oldest,
            finish_reason=sample.finish_reason,
            text=text,
            code=code,
            newest_version=sample.newest if sample.newest != sample.oldest else None,
        )
        traj.turns.append(turn)
        if code is None:
            verdict = format_failure(sample.finish_reason)
            stats["format_failures"] += 1
            if cfg.end_on_format_error:
                end_reason = "format_error"
        else:
            t0 = time.perf_counter()
            result = await verify(task.reference_code, code, task.entry_point)
            waited = time.perf_counter() - t0
            stats["verify_s"] += waited
            stats["verify_calls"] += 1
            verdict = result if isinstance(result, VerifyResult) else VerifyResult.model_validate(result)
            stats["verify_wait_s"] += max(waited - verdict.elapsed_s, 0.0)  # queued or in transit, not evaluating
            turn.verdict = verdict.model_dump(mode="json")
            if verdict.status == "infra_error":
                turn.masked = True
                stats["infra_errors"] += 1
                end_reason = "infra_error"
            else:
                turn.reward = score(verdict, reward_cfg)
                if cfg.end_on_correct and turn.correct:
                    end_reason = "correct_and_done"
        if end_reason is None and index == cfg.max_turns - 1:
            end_reason = "max_turns"
        if end_reason is not None:
            break
        message = budgeted_feedback(verdict, task.entry_point, tokenizer, cfg.feedback_max_tokens)
        planned = stream.plan_feedback(message)
        if len(stream) + planned.added + cfg.min_generation_tokens > cfg.max_context_tokens:
            end_reason = "context_full"
            break
        stream.append_feedback(planned)
        turn.feedback = message["content"]
        stats["feedback_tokens"] += planned.added
    traj.response_ids = stream.response_ids
    traj.response_mask = list(stream.mask)
    traj.response_logprobs = list(stream.logprobs)
    traj.end_reason = end_reason
    traj.metrics = {
        **stats,
        "turns": float(len(traj.turns)),
        "prompt_tokens": float(len(traj.prompt_ids)),
        "total_tokens": float(traj.num_tokens),
        "episode_s": time.perf_counter() - t_start,
    }
    traj.check_aligned()
    return traj
