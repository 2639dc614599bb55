"""The vLLM engine for real (GPU lane: an NVIDIA GPU and vLLM, else skipped with the reason).

As production calls it: the library (VllmEngine, one event loop as in a replica), the Serve deployment
through its handle and the trainer's WeightPublisher, the OpenAI route over HTTP. What must hold: sampled
log-probs are the sampling distribution's (teacher-forced recompute within bf16 noise), budgets, stops and
seeds behave, a push lands bit-identically in the trainer's layout, a push during generation aborts the
running requests with their partial tokens under the old version and nothing mixes versions, a bad push is
refused before anything changes, a dead engine child fails the health check instead of hanging.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import time

import httpx
import psutil
import pytest
import torch

from drkernel.config.sft import TinyModelConfig
from drkernel.config.train import PolicyConfig
from drkernel.model.tiny import build_tiny_model
from drkernel.model.tokenizer import build_tokenizer
from drkernel.model.weights import BucketPacker, state_checksum
from drkernel.types.sampling import GenerateOutput, SamplingParams
from drkernel.types.weights import WeightsManifest
from serve_apps.policy_engine import processed_logprobs

HAVE_GPU = torch.cuda.is_available()
HAVE_VLLM = importlib.util.find_spec("vllm") is not None
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.integration,
    pytest.mark.skipif(not (HAVE_GPU and HAVE_VLLM), reason="needs an NVIDIA GPU and vLLM (the cuda extra)"),
]

SHAPE = TinyModelConfig(hidden_size=256, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=64, intermediate_size=512)
CORPUS = ["def relu(x): return torch.relu(x)\n", "import triton\nimport triton.language as tl\n"] * 3
VLLM = {"enforce_eager": True, "gpu_memory_utilization": 0.1, "kv_cache_memory_gb": 1.0, "max_model_len": 1024}


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(CORPUS, vocab_size=400, min_frequency=1)


def _model(tok, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_tiny_model(SHAPE, tok).to(torch.bfloat16)


@pytest.fixture(scope="module")
def models(tok, tmp_path_factory):
    """Two different random policies: A is the checkpoint the engine starts from, B is pushed into it."""
    a, b = _model(tok, 0), _model(tok, 1)
    path = tmp_path_factory.mktemp("vllm-policy")
    a.save_pretrained(path)
    tok.save_pretrained(path)
    return {"path": str(path), "A": a.cuda().eval(), "B": b.cuda().eval()}


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()  # AsyncLLM's output handler lives on the loop that first used it
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def engine(models, loop):
    from serve_apps.vllm_engine import VllmEngine

    cfg = PolicyConfig(engine="vllm", device="cuda", dtype="bfloat16", vllm=VLLM)
    eng = loop.run_until_complete(asyncio.to_thread(VllmEngine.from_pretrained, models["path"], cfg))
    yield eng
    eng.close()
    loop.run_until_complete(asyncio.sleep(0.1))  # let the engine's output handler see its cancellation


def _gap(model, prompt: list[int], out: GenerateOutput, sampling: SamplingParams) -> torch.Tensor:
    """|engine log-prob - teacher-forced log-prob of the same tokens| per token (fp32 recompute)."""
    ids = torch.tensor([prompt + out.token_ids], device="cuda")
    with torch.no_grad():
        logits = model.float()(ids).logits[0, len(prompt) - 1 : -1]
    model.to(torch.bfloat16)
    ref = processed_logprobs(logits, sampling).gather(-1, ids[0, len(prompt) :, None])[:, 0].cpu()
    return (torch.tensor(out.logprobs) - ref).abs()


def _prompts(tok, n: int) -> list[list[int]]:
    texts = ["def relu(x)", "import triton\nimport triton.language as tl", "def relu(x): return"]
    return [tok.encode(texts[i % len(texts)]) + [i % 50 + 3] for i in range(n)]


def _push(state: dict[str, torch.Tensor], version: int, bucket_bytes: int = 1 << 20):
    buckets, manifest = BucketPacker(bucket_bytes, pin_memory=False).pack(state, version)
    return [b.copy() for b in buckets], manifest


def test_sampled_logprobs_are_the_sampling_distribution(engine, models, tok, loop):
    for sampling in (SamplingParams(max_new_tokens=48), SamplingParams(max_new_tokens=48, temperature=0.7, top_k=20)):
        prompts = _prompts(tok, 8)
        outs = loop.run_until_complete(engine.generate_batch(prompts, [sampling] * 8))
        assert all(o.version == 0 and len(o.token_ids) == len(o.logprobs) >= 1 for o in outs)
        gaps = torch.cat([_gap(models["A"], p, o, sampling) for p, o in zip(prompts, outs)])
        assert gaps.mean() < 0.05, f"mean |dlogp| {gaps.mean():.4f} (T={sampling.temperature})"


def test_budgets_stops_and_seeds(engine, tok, loop):
    prompt = _prompts(tok, 1)[0]
    out = loop.run_until_complete(engine.generate(prompt, SamplingParams(max_new_tokens=5, stop_token_ids=[])))
    assert out.finish_reason in ("length", "stop") and len(out.token_ids) <= 5
    every = SamplingParams(max_new_tokens=50, stop_token_ids=list(range(len(tok))))
    out = loop.run_until_complete(engine.generate(prompt, every))
    assert out.finish_reason == "stop" and len(out.token_ids) == 1
    seeded = SamplingParams(max_new_tokens=32, seed=1234)
    a, b = loop.run_until_complete(engine.generate_batch([prompt, prompt], [seeded, seeded]))
    assert a.token_ids == b.token_ids
    with pytest.raises(ValueError, match="exceeds the engine's max_model_len of 1024 positions"):
        engine.check_request(prompt, SamplingParams(max_new_tokens=1024))


def test_push_lands_bit_identical_and_bad_pushes_change_nothing(engine, models, tok, loop):
    state_b = models["B"].state_dict()
    buckets, manifest = _push(state_b, 1)
    assert len(buckets) > 1  # several buckets, so the per-bucket path is exercised
    seconds = loop.run_until_complete(engine.load_weights(1, buckets, manifest))
    assert engine.version == 1 and seconds > 0
    assert loop.run_until_complete(engine.state_checksum()) == state_checksum(state_b)
    prompt = _prompts(tok, 1)[0]
    out = loop.run_until_complete(engine.generate(prompt, SamplingParams(max_new_tokens=32)))
    assert out.version == 1 and _gap(models["B"], prompt, out, SamplingParams()).mean() < 0.05

    short = WeightsManifest(2, tuple(s for s in manifest.slots if "q_proj" not in s.name), manifest.bucket_nbytes)
    with pytest.raises(ValueError, match="missing"):
        loop.run_until_complete(engine.load_weights(2, buckets, short))
    with pytest.raises(ValueError, match="not newer"):
        loop.run_until_complete(engine.load_weights(1, *_push(state_b, 1)))
    assert engine.version == 1 and loop.run_until_complete(engine.state_checksum()) == state_checksum(state_b)


def test_push_during_generation_aborts_with_partial_tokens_and_never_mixes_versions(engine, models, tok, loop):
    if engine.version != 1:
        pytest.fail("runs after the first push (B loaded as version 1)")
    sampling = SamplingParams(max_new_tokens=600, stop_token_ids=[])
    prompts = _prompts(tok, 16)

    async def scenario():
        running = [asyncio.ensure_future(engine.generate(p, sampling)) for p in prompts]
        await asyncio.sleep(0.3)
        await engine.load_weights(2, *_push(models["A"].state_dict(), 2))
        after = await engine.generate(prompts[0], SamplingParams(max_new_tokens=32))
        return await asyncio.gather(*running), after

    before, after = loop.run_until_complete(scenario())
    aborted = [(p, o) for p, o in zip(prompts, before) if o.finish_reason == "abort"]
    assert aborted, "no request was in flight when the push came"
    for p, o in aborted:  # partial tokens, old version, and every token is B's: none was sampled by A
        assert o.version == 1 and 1 <= len(o.token_ids) < 600
        assert _gap(models["B"], p, o, sampling).mean() < 0.05
    assert after.version == 2 and _gap(models["A"], prompts[0], after, SamplingParams()).mean() < 0.05


def test_serve_handle_publisher_and_http(ray_cluster, models, tok):
    from ray import serve

    from actors.weight_sync import ServeReplicas, WeightPublisher
    from serve_apps.policy import build_policy_app, policy_handle

    cfg = PolicyConfig(
        engine="vllm",
        device="cuda",
        dtype="bfloat16",
        accelerators_per_replica=0.5,
        app_name="test-vllm-policy",
        route_prefix="/test-vllm-policy",
        served_model_name="tiny",
        vllm=VLLM,
    )
    serve.run(build_policy_app(cfg, models["path"]), name=cfg.app_name, route_prefix=cfg.route_prefix)
    try:
        handle = policy_handle(cfg.app_name)
        prompt = _prompts(tok, 1)[0]
        outs = [handle.generate.remote(prompt, SamplingParams(max_new_tokens=16)) for _ in range(24)]
        outs = [r.result(timeout_s=120) for r in outs]
        assert all(o.version == 0 and 1 <= len(o.token_ids) <= 16 for o in outs)
        report = WeightPublisher(ServeReplicas(handle, 1), bucket_mb=1, pin_memory=False).publish(
            models["B"].state_dict()
        )
        assert report.version == 1 and report.replicas == 1
        assert handle.state_checksum.remote().result(timeout_s=120) == state_checksum(models["B"].state_dict())
        assert handle.generate.remote(prompt, SamplingParams(max_new_tokens=4)).result(timeout_s=60).version == 1
        url = ray_cluster["http_url"] + cfg.route_prefix + "/v1/chat/completions"
        body = {"messages": [{"role": "user", "content": "relu"}], "max_tokens": 8, "logprobs": True}
        r = httpx.post(url, json=body, timeout=120)
        assert r.status_code == 200, r.text
        assert r.json()["system_fingerprint"] == "policy-v1"
    finally:
        serve.delete(cfg.app_name)


def test_dead_engine_child_fails_health_instead_of_hanging(engine, tok, loop):
    from vllm.v1.engine.exceptions import EngineDeadError

    procs = engine.llm.engine_core.resources.engine_manager.processes  # vLLM's record of its engine child
    assert procs and all(p.pid != os.getpid() and psutil.pid_exists(p.pid) for p in procs)
    for p in procs:
        os.kill(p.pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            loop.run_until_complete(engine.check_health())
        except EngineDeadError:
            break
        time.sleep(0.5)
    else:
        pytest.fail("check_health still passes 60 s after the engine child was killed")
    with pytest.raises(EngineDeadError):
        loop.run_until_complete(
            asyncio.wait_for(engine.generate(_prompts(tok, 1)[0], SamplingParams(max_new_tokens=4)), 30)
        )
