"""run_episode with a scripted engine (real token ids of chosen replies) and scripted verdicts: every branch of
the loop, and the token arrays the trainer relies on."""

from __future__ import annotations

import asyncio

import pytest
from episode_support import Reply, ScriptedEngine, ScriptedVerifier, fenced, ok, rollout_cfg, task_row

from drkernel.rl.rewards import RewardConfig
from drkernel.rollout.episode import CUT_OFF_MESSAGE, NO_CODE_MESSAGE, budgeted_feedback, run_episode
from drkernel.types.verify_result import ErrorInfo, VerifyResult

REWARD = RewardConfig()
CODE_A = "import torch\nclass ModelNew(torch.nn.Module):\n    pass"
CODE_B = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n        return a + b"


@pytest.fixture(scope="module")
def row(tasks):
    return task_row(tasks["add"].reference)


def _run(row, engine, verifier, tokenizer, cfg, **kw):
    return asyncio.run(run_episode(row, "g0", 1, engine, verifier, tokenizer, cfg, REWARD, **kw))


def test_multi_turn_arrays_are_aligned_and_hold_the_sampled_ids(row, tokenizer):
    engine = ScriptedEngine(tokenizer, [Reply(fenced(CODE_A)), Reply(fenced(CODE_B)), Reply(fenced(CODE_A))])
    verifier = ScriptedVerifier([ok(False), ok(True, speedup=1.0), ok(True)])
    traj = _run(row, engine, verifier, tokenizer, rollout_cfg(max_turns=3))
    traj.check_aligned()
    assert traj.end_reason == "max_turns" and [t.index for t in traj.turns] == [0, 1, 2]
    assert traj.group_id == "g0" and traj.sample_index == 1 and traj.task_uid == "t-1"
    assert len(traj.response_ids) == len(traj.response_mask) == len(traj.response_logprobs)
    sampled = set()
    for turn, out in zip(traj.turns, engine.outputs, strict=True):
        assert traj.response_ids[turn.start : turn.end] == out.token_ids  # never re-tokenised
        assert traj.response_logprobs[turn.start : turn.end] == out.logprobs
        sampled |= set(range(turn.start, turn.end))
    assert sum(traj.response_mask) == len(sampled) == sum(len(o.token_ids) for o in engine.outputs)
    for i, (m, lp) in enumerate(zip(traj.response_mask, traj.response_logprobs, strict=True)):
        assert (m == 1) == (i in sampled)
        if m == 0:
            assert lp == 0.0
    # Turn k was generated from exactly the stream before its span, and the last turn ends the stream.
    full = traj.prompt_ids + traj.response_ids
    for turn, (context, _) in zip(traj.turns, engine.calls, strict=True):
        assert context == full[: len(traj.prompt_ids) + turn.start]
    assert traj.turns[-1].end == len(traj.response_ids) and traj.turns[-1].feedback is None
    # The whole stream is the chat the policy saw: prompt, replies and feedback through the chat template.
    chat = [m.model_dump() for m in row.prompt]
    for turn in traj.turns:
        chat.append({"role": "assistant", "content": turn.text})
        if turn.feedback is not None:
            chat.append({"role": "user", "content": turn.feedback})
    rendered = tokenizer.apply_chat_template(chat, tokenize=False)
    assert tokenizer.decode(full) + "\n" == rendered  # the stream ends at the last <|im_end|> the policy sampled
    assert [t.reward for t in traj.turns] == [0.0, 1.0, 0.5]
    assert traj.turns[0].feedback.startswith("Verifier feedback") and "correct: no" in traj.turns[0].feedback
    assert [c[1] for c in verifier.calls] == [CODE_A, CODE_B, CODE_A]
    assert {c[0] for c in verifier.calls} == {row.reference_code} and {c[2] for c in verifier.calls} == {"Model"}
    m = traj.metrics
    assert m["turns"] == 3 and m["verify_calls"] == 3 and m["format_failures"] == 0
    assert m["generated_tokens"] == sum(traj.response_mask)
    assert m["feedback_tokens"] == len(traj.response_ids) - sum(traj.response_mask)
    assert m["prompt_tokens"] == len(traj.prompt_ids) and m["total_tokens"] == traj.num_tokens
    assert m["generate_s"] >= 0 and m["verify_s"] >= 0 and m["episode_s"] >= m["generate_s"]


def test_sampling_follows_the_config(row, tokenizer):
    engine = ScriptedEngine(tokenizer, [Reply(fenced(CODE_A))])
    cfg = rollout_cfg(max_turns=1, temperature=0.7, top_p=0.9, top_k=5, max_new_tokens=300)
    _run(row, engine, ScriptedVerifier([ok()]), tokenizer, cfg)
    params = engine.calls[0][1]
    assert (params.temperature, params.top_p, params.top_k, params.max_new_tokens) == (0.7, 0.9, 5, 300)
    assert params.stop_token_ids == [tokenizer.convert_tokens_to_ids("<|im_end|>")]


def test_seeds_are_unset_by_default_and_follow_group_sample_and_turn_when_set(row, tokenizer):
    replies = [Reply(fenced(CODE_A)), Reply(fenced(CODE_B))]
    engine = ScriptedEngine(tokenizer, replies)
    _run(row, engine, ScriptedVerifier([ok(), ok()]), tokenizer, rollout_cfg(max_turns=2))
    assert [c[1].seed for c in engine.calls] == [None, None]

    def seeds(group: str, index: int, seed: int = 7) -> list[int]:
        engine = ScriptedEngine(tokenizer, replies)
        cfg = rollout_cfg(max_turns=2, seed=seed)
        asyncio.run(run_episode(row, group, index, engine, ScriptedVerifier([ok(), ok()]), tokenizer, cfg, REWARD))
        return [c[1].seed for c in engine.calls]

    first = seeds("g0", 1)
    assert first == seeds("g0", 1)  # a second run (the control arm) draws with the same seeds
    assert first[0] != first[1] and all(0 <= s < 2**63 for s in first)  # each turn its own draw
    others = [seeds("g0", 2), seeds("g1", 1), seeds("g0", 1, seed=8)]
    assert all(not set(first) & set(o) for o in others)  # sibling, other group, other run seed: all new draws


def test_versions_span_the_turns(row, tokenizer):
    engine = ScriptedEngine(tokenizer, [Reply(fenced(CODE_A), version=3), Reply(fenced(CODE_B), version=5)])
    traj = _run(row, engine, ScriptedVerifier([ok(), ok()]), tokenizer, rollout_cfg())
    assert [t.policy_version for t in traj.turns] == [3, 5]
    assert (traj.min_version, traj.max_version) == (3, 5)


def test_format_failure_scores_zero_without_verifying_and_says_why(row, tokenizer):
    engine = ScriptedEngine(tokenizer, [Reply("I think a + b is fine, no code needed."), Reply(fenced(CODE_B))])
    verifier = ScriptedVerifier([ok()])
    traj = _run(row, engine, verifier, tokenizer, rollout_cfg())
    first, second = traj.turns
    assert first.code is None and first.verdict is None and first.reward == 0.0 and not first.masked
    assert NO_CODE_MESSAGE in first.feedback and "status: not accepted" in first.feedback
    assert [c[1] for c in verifier.calls] == [CODE_B]  # only the turn with code was verified
    assert second.code == CODE_B and second.reward == 0.5 and traj.end_reason == "max_turns"
    assert traj.metrics["format_failures"] == 1 and traj.metrics["verify_calls"] == 1


def test_format_failure_can_end_the_episode(row, tokenizer):
    engine = ScriptedEngine(tokenizer, [Reply("no code"), Reply(fenced(CODE_B))])
    traj = _run(row, engine, ScriptedVerifier([]), tokenizer, rollout_cfg(end_on_format_error=True))
    assert traj.end_reason == "format_error" and len(traj.turns) == 1 and len(engine.calls) == 1
    assert traj.turns[0].end == len(traj.response_ids)  # no feedback after the last turn


def test_cut_off_block_is_a_format_failure_and_the_turn_is_closed_untrained(row, tokenizer):
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    cut = "Here it is:\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n"
    engine = ScriptedEngine(tokenizer, [Reply(cut, finish="length"), Reply(fenced(CODE_B))])
    verifier = ScriptedVerifier([ok()])
    traj = _run(row, engine, verifier, tokenizer, rollout_cfg())
    first = traj.turns[0]
    assert first.finish_reason == "length" and first.code is None and first.reward == 0.0
    assert CUT_OFF_MESSAGE in first.feedback and len(verifier.calls) == 1
    assert traj.response_ids[first.end - 1] != im_end
    assert traj.response_ids[first.end] == im_end and traj.response_mask[first.end] == 0  # closed, not trained
    assert traj.response_logprobs[first.end] == 0.0
    traj.check_aligned()


def test_length_cut_after_a_closed_block_is_verified(row, tokenizer):
    engine = ScriptedEngine(tokenizer, [Reply(fenced(CODE_A) + "\nAnd some more words", finish="length")])
    verifier = ScriptedVerifier([ok()])
    traj = _run(row, engine, verifier, tokenizer, rollout_cfg(max_turns=1))
    assert traj.turns[0].finish_reason == "length" and traj.turns[0].code == CODE_A
    assert verifier.calls[0][1] == CODE_A and traj.turns[0].reward == 0.5


def test_infra_error_masks_the_turn_and_ends_the_episode(row, tokenizer):
    engine = ScriptedEngine(tokenizer, [Reply(fenced(CODE_A)), Reply(fenced(CODE_B))])
    infra = VerifyResult(status="infra_error", error=ErrorInfo(kind="infra", message="replica lost"))
    traj = _run(row, engine, ScriptedVerifier([infra]), tokenizer, rollout_cfg())
    (turn,) = traj.turns
    assert turn.masked and turn.reward == 0.0 and turn.verdict["status"] == "infra_error"
    assert traj.end_reason == "infra_error" and len(engine.calls) == 1 and turn.feedback is None
    assert turn.end == len(traj.response_ids) and traj.metrics["infra_errors"] == 1


def test_verdicts_are_priced_by_the_reward_config(row, tokenizer):
    engine = ScriptedEngine(tokenizer, [Reply(fenced(CODE_A))])
    verdict = ok(True, speedup=2.0, coverage=1.0)
    traj = asyncio.run(
        run_episode(
            row,
            "g",
            0,
            engine,
            ScriptedVerifier([verdict]),
            tokenizer,
            rollout_cfg(max_turns=1),
            RewardConfig(coverage_weight=0.0),
        )
    )
    assert traj.turns[0].reward == pytest.approx(0.5 + 0.5 * 2.0)
    assert "reward" not in traj.turns[0].verdict  # the price lives on the turn; the verdict record carries none


def test_end_on_correct(row, tokenizer):
    engine = ScriptedEngine(tokenizer, [Reply(fenced(CODE_A)), Reply(fenced(CODE_B)), Reply(fenced(CODE_A))])
    verifier = ScriptedVerifier([ok(False), ok(True), ok(True)])
    traj = _run(row, engine, verifier, tokenizer, rollout_cfg(max_turns=3, end_on_correct=True))
    assert traj.end_reason == "correct_and_done" and len(traj.turns) == 2
    hacked = ScriptedEngine(tokenizer, [Reply(fenced(CODE_A)), Reply(fenced(CODE_B))])
    traj = _run(
        row,
        hacked,
        ScriptedVerifier([ok(True, hack="result_caching"), ok(True)]),
        tokenizer,
        rollout_cfg(end_on_correct=True),
    )
    assert traj.end_reason == "correct_and_done" and len(traj.turns) == 2  # a hack is not "correct"


def _sizes(row, tokenizer):
    """Lengths of the prompt, the first reply and its feedback, measured with a roomy context."""
    engine = ScriptedEngine(tokenizer, [Reply(fenced(CODE_A)), Reply(fenced(CODE_B))])
    traj = _run(row, engine, ScriptedVerifier([ok(False), ok()]), tokenizer, rollout_cfg())
    first, second = traj.turns
    return len(traj.prompt_ids), first.end, second.start - first.end, second.end - second.start


def test_context_full_ends_the_episode_without_truncating(row, tokenizer):
    prompt, reply, feedback, _ = _sizes(row, tokenizer)
    limit = prompt + reply + feedback + 8 - 1  # one token short of feedback + min_generation_tokens
    engine = ScriptedEngine(tokenizer, [Reply(fenced(CODE_A)), Reply(fenced(CODE_B))])
    traj = _run(row, engine, ScriptedVerifier([ok(False)]), tokenizer, rollout_cfg(max_context_tokens=limit))
    assert traj.end_reason == "context_full" and len(traj.turns) == 1 and len(engine.calls) == 1
    assert traj.turns[0].feedback is None and traj.turns[0].end == len(traj.response_ids)
    assert len(traj.prompt_ids) == prompt and traj.num_tokens <= limit


def test_exactly_min_generation_tokens_of_room_still_gets_a_turn(row, tokenizer):
    prompt, reply, feedback, _ = _sizes(row, tokenizer)
    limit = prompt + reply + feedback + 8
    engine = ScriptedEngine(tokenizer, [Reply(fenced(CODE_A)), Reply(fenced(CODE_B))])
    traj = _run(row, engine, ScriptedVerifier([ok(False)]), tokenizer, rollout_cfg(max_context_tokens=limit))
    assert len(traj.turns) == 2 and engine.calls[1][1].max_new_tokens == 8 and traj.num_tokens == limit


def test_the_last_turn_gets_only_the_room_left(row, tokenizer):
    prompt, reply, feedback, second = _sizes(row, tokenizer)
    limit = prompt + reply + feedback + 8 + 3  # room for 11 new tokens, fewer than the second reply needs
    assert second > 11
    engine = ScriptedEngine(tokenizer, [Reply(fenced(CODE_A)), Reply(fenced(CODE_B))])
    traj = _run(row, engine, ScriptedVerifier([ok(False)]), tokenizer, rollout_cfg(max_context_tokens=limit))
    assert engine.calls[1][1].max_new_tokens == 11
    assert traj.turns[1].finish_reason == "length" and traj.turns[1].code is None  # cut mid-block
    assert traj.num_tokens == limit and traj.end_reason == "max_turns"
    assert traj.prompt_ids == engine.calls[0][0]  # the prompt was never cut


def test_a_prompt_that_leaves_no_room_is_an_error(row, tokenizer):
    prompt, *_ = _sizes(row, tokenizer)
    engine = ScriptedEngine(tokenizer, [Reply(fenced(CODE_A))])
    with pytest.raises(ValueError, match="min_generation_tokens"):
        _run(
            row,
            engine,
            ScriptedVerifier([]),
            tokenizer,
            rollout_cfg(max_context_tokens=max(prompt + 7, 64), max_new_tokens=8),
        )
    assert engine.calls == []


def test_feedback_is_held_to_its_token_budget(row, tokenizer):
    noisy = ok(
        False,
        error=ErrorInfo(
            kind="runtime", message="Traceback\n" + "  frame line x = y\n" * 400 + "RuntimeError: shapes differ"
        ),
    )
    for budget in (130, 200, 400):  # this tiny tokenizer needs about 120 tokens for the shortest message
        message = budgeted_feedback(noisy, "Model", tokenizer, budget)
        assert len(tokenizer.encode(message["content"], add_special_tokens=False)) <= budget
        assert message["content"].rstrip().endswith("```python block.")
    longest = budgeted_feedback(noisy, "Model", tokenizer, 400)["content"]
    assert "shapes differ" in longest and "[truncated]" in longest
    with pytest.raises(ValueError, match="rollout.feedback_max_tokens=16"):
        budgeted_feedback(noisy, "Model", tokenizer, 16)
    engine = ScriptedEngine(tokenizer, [Reply(fenced(CODE_A)), Reply(fenced(CODE_B))])
    traj = _run(row, engine, ScriptedVerifier([noisy, ok()]), tokenizer, rollout_cfg(feedback_max_tokens=150))
    assert len(tokenizer.encode(traj.turns[0].feedback, add_special_tokens=False)) <= 150


def test_an_aborted_reply_is_resumed_and_keeps_both_versions(row, tokenizer):
    text = fenced(CODE_A)
    ids = tokenizer.encode(text, add_special_tokens=False)
    head = tokenizer.decode(ids[:10])
    assert tokenizer.encode(head, add_special_tokens=False) == ids[:10]
    engine = ScriptedEngine(
        tokenizer, [Reply(head, version=1, finish="abort"), Reply(tokenizer.decode(ids[10:]), version=2)]
    )
    traj = _run(row, engine, ScriptedVerifier([ok()]), tokenizer, rollout_cfg(max_turns=1, max_new_tokens=300))
    (turn,) = traj.turns
    assert engine.calls[1][0] == engine.calls[0][0] + ids[:10]  # resumed after the partial tokens
    assert engine.calls[1][1].max_new_tokens == 290
    assert traj.response_ids[turn.start : turn.end] == engine.outputs[0].token_ids + engine.outputs[1].token_ids
    assert turn.code == CODE_A and turn.versions == (1, 2) and (traj.min_version, traj.max_version) == (1, 2)
    assert traj.metrics["aborts"] == 1
    assert engine.calls[0][1].seed is None and engine.calls[1][1].seed is None
    seeded = ScriptedEngine(
        tokenizer, [Reply(head, version=1, finish="abort"), Reply(tokenizer.decode(ids[10:]), version=2)]
    )
    _run(row, seeded, ScriptedVerifier([ok()]), tokenizer, rollout_cfg(max_turns=1, max_new_tokens=300, seed=3))
    assert seeded.calls[1][1].seed == seeded.calls[0][1].seed + 1  # the resumed request does not replay its draw


def test_endless_aborts_give_the_episode_up(row, tokenizer):
    engine = ScriptedEngine(tokenizer, [Reply("x", finish="abort")] * 10)
    with pytest.raises(RuntimeError, match="aborted 3 times"):
        _run(row, engine, ScriptedVerifier([]), tokenizer, rollout_cfg(max_abort_resumes=2))
    assert len(engine.calls) == 3


def test_engine_output_longer_than_its_budget_is_refused(row, tokenizer):
    class Greedy(ScriptedEngine):
        async def __call__(self, prompt_ids, sampling):
            out = await super().__call__(prompt_ids, sampling.model_copy(update={"max_new_tokens": 10_000}))
            return out

    engine = Greedy(tokenizer, [Reply(fenced(CODE_B))])
    with pytest.raises(ValueError, match="budget of 12"):
        _run(row, engine, ScriptedVerifier([]), tokenizer, rollout_cfg(max_new_tokens=12))


def test_a_failing_generate_propagates_and_leaves_no_task(row, tokenizer):
    class Broken(ScriptedEngine):
        async def __call__(self, prompt_ids, sampling):
            if self.calls:
                raise ConnectionError("policy replica died")
            return await super().__call__(prompt_ids, sampling)

    async def main():
        engine = Broken(tokenizer, [Reply(fenced(CODE_A))])
        with pytest.raises(ConnectionError, match="policy replica died"):
            await run_episode(row, "g", 0, engine, ScriptedVerifier([ok()]), tokenizer, rollout_cfg(), REWARD)
        return asyncio.all_tasks() - {asyncio.current_task()}

    assert asyncio.run(main()) == set()


def test_cancelling_an_episode_cancels_its_verify(row, tokenizer):
    state = {}

    async def slow_verify(reference, candidate, entry_point):
        state["started"] = True
        try:
            await asyncio.sleep(60)
        finally:
            state["cleaned"] = True

    async def main():
        engine = ScriptedEngine(tokenizer, [Reply(fenced(CODE_A))])
        task = asyncio.create_task(run_episode(row, "g", 0, engine, slow_verify, tokenizer, rollout_cfg(), REWARD))
        while not state.get("started"):
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return asyncio.all_tasks() - {asyncio.current_task()}

    assert asyncio.run(main()) == set() and state["cleaned"]


def test_prompt_style_rebuilds_the_first_turn(row, tokenizer):
    engine = ScriptedEngine(tokenizer, [Reply(fenced(CODE_A))])
    cfg = rollout_cfg(max_turns=1)
    own = _run(row, engine, ScriptedVerifier([ok()]), tokenizer, cfg)
    full = _run(
        row,
        ScriptedEngine(tokenizer, [Reply(fenced(CODE_A))]),
        ScriptedVerifier([ok()]),
        tokenizer,
        cfg,
        prompt_style="full",
    )
    assert tokenizer.decode(own.prompt_ids) == tokenizer.apply_chat_template(
        [m.model_dump() for m in row.prompt], add_generation_prompt=True, tokenize=False
    )
    assert "a good answer is" in tokenizer.decode(full.prompt_ids)
    assert "a good answer is" not in tokenizer.decode(own.prompt_ids)
