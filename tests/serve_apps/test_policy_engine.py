"""The transformers engine on CPU: log-probs equal a teacher-forced forward pass of the same model (fp32,
1e-5) for every sampling setting the recipe can use, stops and budgets per request, seeds, clear errors."""

from __future__ import annotations

import asyncio

import pytest
import torch
from transformers import GenerationConfig

from drkernel.config.sft import TinyModelConfig
from drkernel.config.train import PolicyConfig
from drkernel.model.tiny import build_tiny_model
from drkernel.model.tokenizer import build_tokenizer
from drkernel.model.weights import BucketPacker, state_checksum
from drkernel.types.sampling import SamplingParams
from serve_apps.policy_engine import PolicyEngine, TransformersEngine, make_engine, processed_logprobs

SMALL = TinyModelConfig(hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=32, intermediate_size=128)
CORPUS = ["def relu(x): return torch.relu(x)\n", "import triton\nimport triton.language as tl\n"] * 3


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(CORPUS, vocab_size=400, min_frequency=1)


@pytest.fixture(scope="module")
def model(tok):
    torch.set_num_threads(1)
    m = build_tiny_model(SMALL, tok)
    # what a Qwen3 checkpoint ships: any of these leaking into generate would shift the log-probs
    m.generation_config = GenerationConfig(
        temperature=0.6,
        top_k=20,
        top_p=0.95,
        repetition_penalty=1.3,
        min_new_tokens=5,
        no_repeat_ngram_size=2,
        do_sample=True,
    )
    return m


@pytest.fixture(scope="module")
def engine(model, tok) -> TransformersEngine:
    return TransformersEngine(model, [tok.eos_token_id], tok.pad_token_id)


def _prompts(tok) -> list[list[int]]:
    return [tok.encode("def relu(x)"), tok.encode("import triton\nimport triton.language as tl relu x"), [7]]


def _teacher_forced(model, prompt: list[int], tokens: list[int], sampling: SamplingParams) -> torch.Tensor:
    with torch.no_grad():
        logits = model(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 : -1]
    return processed_logprobs(logits, sampling).gather(-1, torch.tensor(tokens)[:, None])[:, 0]


@pytest.mark.parametrize(
    "sampling",
    [
        SamplingParams(temperature=1.0, max_new_tokens=24),  # the recipe's rollout setting
        SamplingParams(temperature=0.7, max_new_tokens=24),  # log_softmax(logits / 0.7)
        SamplingParams(temperature=0.8, top_k=40, top_p=0.9, max_new_tokens=24),  # the truncated distribution
        SamplingParams(temperature=0.8, top_k=40, top_p=0.9, max_new_tokens=24, seed=5),  # per-row generators
    ],
    ids=["T1", "T0.7", "topk-topp", "seeded-topk-topp"],
)
def test_logprobs_equal_teacher_forced_forward(engine, model, tok, sampling):
    prompts = _prompts(tok)
    outs = asyncio.run(engine.generate_batch(prompts, [sampling] * len(prompts)))
    for prompt, out in zip(prompts, outs):
        assert len(out.token_ids) == len(out.logprobs) >= 1 and out.version == 0
        ref = _teacher_forced(model, prompt, out.token_ids, sampling)
        assert torch.allclose(torch.tensor(out.logprobs), ref, atol=1e-5, rtol=0), (ref, out.logprobs)
    if sampling.top_k:  # truncation is real: the plain T-scaled log-probs are larger (less mass to share)
        plain = _teacher_forced(model, prompts[0], outs[0].token_ids, SamplingParams(temperature=0.8))
        assert (torch.tensor(outs[0].logprobs) > plain + 1e-3).all()


def test_greedy_is_argmax_with_unscaled_logprobs_and_batch_independent(engine, model, tok):
    greedy = SamplingParams(temperature=0, top_k=5, max_new_tokens=16)
    prompts = _prompts(tok)
    batched = asyncio.run(engine.generate_batch(prompts, [greedy] * 3))
    for prompt, out in zip(prompts, batched):
        with torch.no_grad():
            logits = model(torch.tensor([prompt + out.token_ids])).logits[0, len(prompt) - 1 : -1]
        assert out.token_ids == logits.argmax(-1).tolist()
        ref = torch.log_softmax(logits, -1).gather(-1, torch.tensor(out.token_ids)[:, None])[:, 0]
        assert torch.allclose(torch.tensor(out.logprobs), ref, atol=1e-5, rtol=0)
        assert asyncio.run(engine.generate(prompt, greedy)).token_ids == out.token_ids  # left padding is harmless


def test_stop_ids_and_budgets_are_per_request(engine, tok):
    prompt = _prompts(tok)[0]
    free = asyncio.run(engine.generate(prompt, SamplingParams(temperature=0, max_new_tokens=12)))
    assert free.finish_reason == "length" and len(free.token_ids) == 12
    stop_at = free.token_ids[4]
    first = free.token_ids.index(stop_at)
    stopped, short = asyncio.run(
        engine.generate_batch(
            [prompt, prompt],
            [
                SamplingParams(temperature=0, max_new_tokens=12, stop_token_ids=[stop_at]),
                SamplingParams(temperature=0, max_new_tokens=3),
            ],
        )
    )
    assert stopped.finish_reason == "stop" and stopped.token_ids == free.token_ids[: first + 1]
    assert short.finish_reason == "length" and short.token_ids == free.token_ids[:3]
    assert len(short.logprobs) == 3


def test_eos_ends_a_response(model, tok):
    prompt = _prompts(tok)[0]
    first = asyncio.run(
        TransformersEngine(model, [tok.eos_token_id], tok.pad_token_id).generate(
            prompt, SamplingParams(temperature=0, max_new_tokens=8)
        )
    )
    eos_engine = TransformersEngine(model, [first.token_ids[2]], tok.pad_token_id)  # that token is "eos" here
    out = asyncio.run(eos_engine.generate(prompt, SamplingParams(temperature=0, max_new_tokens=8)))
    assert out.finish_reason == "stop" and out.token_ids[-1] == first.token_ids[2] and len(out.token_ids) <= 3


def test_seeded_requests_repeat_whatever_they_are_batched_with(engine, tok):
    prompts = _prompts(tok)
    seeded = SamplingParams(max_new_tokens=16, seed=11)
    alone = asyncio.run(engine.generate(prompts[1], seeded))
    mixed = asyncio.run(
        engine.generate_batch(
            prompts, [SamplingParams(max_new_tokens=16), seeded, SamplingParams(max_new_tokens=16, seed=12)]
        )
    )
    assert mixed[1].token_ids == alone.token_ids
    assert torch.allclose(torch.tensor(mixed[1].logprobs), torch.tensor(alone.logprobs), atol=1e-5, rtol=0)
    other = asyncio.run(engine.generate(prompts[1], seeded.model_copy(update={"seed": 12})))
    assert other.token_ids != alone.token_ids
    assert (
        mixed[2].token_ids == asyncio.run(engine.generate(prompts[2], seeded.model_copy(update={"seed": 12}))).token_ids
    )


def test_seeded_draws_follow_the_sampling_distribution(engine, model, tok):
    """Seeded rows are samples, not argmaxes: 3000 seeds' first tokens match the softmax (temperature 0.1 makes
    this untrained model's flat logits a distribution of a few likely tokens, so 3000 draws can resolve it)."""
    sampling = SamplingParams(temperature=0.1, max_new_tokens=1)
    prompt = _prompts(tok)[0]
    outs = asyncio.run(
        engine.generate_batch([prompt] * 3000, [sampling.model_copy(update={"seed": i}) for i in range(3000)])
    )
    with torch.no_grad():
        probs = processed_logprobs(model(torch.tensor([prompt])).logits[0, -1], sampling).exp()
    counts = torch.bincount(torch.tensor([o.token_ids[0] for o in outs]), minlength=probs.numel()).double()
    top = probs.topk(3).indices
    assert probs[top[0]] < 0.6 and probs[top[2]] > 0.03  # the three likeliest tokens all carry weight
    # each frequency within 0.03 of its probability (about 3 standard errors at 3000 draws)
    assert torch.allclose(counts[top] / 3000, probs[top].double(), atol=0.03, rtol=0), (counts[top], probs[top])


def test_bad_requests_are_named(engine):
    with pytest.raises(ValueError, match="prompt_ids is empty"):
        asyncio.run(engine.generate([], SamplingParams()))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        asyncio.run(engine.generate([1, 10**6], SamplingParams()))
    with pytest.raises(ValueError, match="exceeds the model's 4096 positions"):
        asyncio.run(engine.generate([1] * 4000, SamplingParams(max_new_tokens=512)))


def test_load_weights_is_bit_identical_and_versions_only_advance(tok):
    engine = TransformersEngine(build_tiny_model(SMALL, tok), [tok.eos_token_id], tok.pad_token_id)
    trainer = build_tiny_model(SMALL.model_copy(update={"seed": 3}), tok)
    buckets, manifest = BucketPacker(bucket_bytes=50_000).pack(trainer.state_dict(), version=1)
    assert len(buckets) > 1
    assert asyncio.run(engine.state_checksum()) != state_checksum(trainer.state_dict())
    assert asyncio.run(engine.load_weights(1, buckets, manifest)) >= 0
    assert engine.version == 1 and asyncio.run(engine.state_checksum()) == state_checksum(trainer.state_dict())
    with pytest.raises(ValueError, match="not newer"):
        asyncio.run(engine.load_weights(1, buckets, manifest))
    with pytest.raises(ValueError, match="manifest for version 1"):
        asyncio.run(engine.load_weights(2, buckets, manifest))


def test_engine_selection_by_config(tmp_path, tok):
    model = build_tiny_model(SMALL, tok)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    engine = make_engine(PolicyConfig(device="cpu"), str(tmp_path))
    assert isinstance(engine, TransformersEngine) and isinstance(engine, PolicyEngine)
    assert engine.stop_token_ids == [tok.convert_tokens_to_ids("<|im_end|>")]
    with pytest.raises(ValueError, match="'vllm' runs on cuda, but policy.device resolves to 'cpu'"):
        make_engine(PolicyConfig(engine="vllm", device="cpu"), str(tmp_path))
    with pytest.raises(ValueError, match="'vllm_ascend' runs on npu, but policy.device resolves to 'cpu'"):
        make_engine(PolicyConfig(engine="vllm_ascend", device="cpu"), str(tmp_path))
