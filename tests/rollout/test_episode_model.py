"""run_episode with the real tiny Qwen3 sampling (random init, a few tokens a turn): the rollout log-prob of
every trained token equals a teacher-forced forward over the finished stream, so ids, mask and log-probs line
up across turns and feedback. The policy deployment's engine is tested in tests/serve_apps; this sampler is
the smallest honest stand-in (plain ancestral sampling at temperature 1)."""

from __future__ import annotations

import asyncio

import pytest
import torch
from episode_support import ScriptedVerifier, ok, rollout_cfg, task_row

from drkernel.config.sft import TinyModelConfig
from drkernel.model.tiny import build_tiny_model
from drkernel.rl.rewards import RewardConfig
from drkernel.rollout.episode import run_episode
from drkernel.types.sampling import GenerateOutput, SamplingParams

SMALL = TinyModelConfig(hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=32, intermediate_size=128)


@torch.no_grad()
def test_rollout_logprobs_match_a_teacher_forced_forward(tasks, tokenizer):
    model = build_tiny_model(SMALL, tokenizer).eval()
    gen = torch.Generator().manual_seed(0)
    version = {"now": 7}

    async def generate(prompt_ids: list[int], sampling: SamplingParams) -> GenerateOutput:
        ids, logprobs, finish = list(prompt_ids), [], "length"
        for _ in range(sampling.max_new_tokens):
            logits = model(torch.tensor([ids])).logits[0, -1].float()
            lp = torch.log_softmax(logits, -1)
            token = int(torch.multinomial(lp.exp(), 1, generator=gen))
            ids.append(token)
            logprobs.append(float(lp[token]))
            if token in sampling.stop_token_ids:
                finish = "stop"
                break
        version["now"] += 1
        return GenerateOutput(
            token_ids=ids[len(prompt_ids) :], logprobs=logprobs, finish_reason=finish, version=version["now"]
        )

    cfg = rollout_cfg(max_turns=3, max_new_tokens=6, min_generation_tokens=4)
    traj = asyncio.run(
        run_episode(
            task_row(tasks["relu"].reference),
            "g",
            0,
            generate,
            ScriptedVerifier([ok()] * 3),
            tokenizer,
            cfg,
            RewardConfig(),
        )
    )
    traj.check_aligned()
    assert len(traj.turns) == 3 and traj.end_reason == "max_turns"
    assert (traj.min_version, traj.max_version) == (8, 10)
    assert sum(traj.response_mask) == sum(t.end - t.start for t in traj.turns) > 0
    assert traj.response_mask.count(0) > 0  # feedback between the turns

    full = torch.tensor([traj.prompt_ids + traj.response_ids])
    forced = torch.log_softmax(model(full).logits[0].float(), -1)
    p = len(traj.prompt_ids)
    for i, (token, m, lp) in enumerate(zip(traj.response_ids, traj.response_mask, traj.response_logprobs, strict=True)):
        if m:
            assert lp == pytest.approx(float(forced[p + i - 1, token]), abs=1e-5), i
        else:
            assert lp == 0.0
