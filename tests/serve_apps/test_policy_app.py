"""The policy app on the session's real Ray Serve cluster: two replicas, batching, weight pushes through the
object store (bit-identical on every replica), a push during generation, the OpenAI route over HTTP."""

from __future__ import annotations

import math
import os
import time

import httpx
import pytest
import torch

from drkernel.config.sft import TinyModelConfig
from drkernel.config.train import PolicyConfig
from drkernel.model.tiny import build_tiny_model
from drkernel.model.tokenizer import build_tokenizer
from drkernel.model.weights import BucketPacker, state_checksum
from drkernel.types.sampling import GenerateOutput, SamplingParams
from serve_apps.policy_engine import processed_logprobs

pytestmark = pytest.mark.integration

SMALL = TinyModelConfig(hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=32, intermediate_size=128)
CORPUS = ["def relu(x): return torch.relu(x)\n", "import triton\nimport triton.language as tl\n"] * 3
TOKEN = "policy-test-token"
CFG = PolicyConfig(
    device="cpu",
    num_replicas=2,
    max_batch_size=8,
    batch_wait_timeout_s=0.1,
    cpus_per_replica=0.5,
    app_name="test-policy",
    route_prefix="/test-policy",
    served_model_name="tiny",
)


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(CORPUS, vocab_size=400, min_frequency=1)


@pytest.fixture(scope="module")
def policy(ray_cluster, tok, tmp_path_factory):
    from ray import serve

    from serve_apps.policy import build_policy_app, policy_handle

    path = tmp_path_factory.mktemp("policy-model")
    build_tiny_model(SMALL, tok).save_pretrained(path)
    tok.save_pretrained(path)
    old = os.environ.get("DRKERNEL_API_TOKEN")
    os.environ["DRKERNEL_API_TOKEN"] = TOKEN
    try:
        app = build_policy_app(CFG, str(path))  # the token travels to the ingress in its runtime_env
    finally:
        os.environ.pop("DRKERNEL_API_TOKEN") if old is None else os.environ.update(DRKERNEL_API_TOKEN=old)
    serve.run(app, name=CFG.app_name, route_prefix=CFG.route_prefix)
    yield {"handle": policy_handle(CFG.app_name), "url": ray_cluster["http_url"] + CFG.route_prefix}
    serve.delete(CFG.app_name)


def _generate_many(handle, requests: list[tuple[list[int], SamplingParams]]) -> list[GenerateOutput]:
    responses = [handle.generate.remote(p, s) for p, s in requests]
    return [r.result(timeout_s=120) for r in responses]


def _check_logprobs(model, prompt: list[int], out: GenerateOutput, sampling: SamplingParams) -> None:
    with torch.no_grad():
        logits = model(torch.tensor([prompt + out.token_ids])).logits[0, len(prompt) - 1 : -1]
    ref = processed_logprobs(logits, sampling).gather(-1, torch.tensor(out.token_ids)[:, None])[:, 0]
    assert torch.allclose(torch.tensor(out.logprobs), ref, atol=1e-5, rtol=0)


def test_concurrent_requests_share_generate_calls(policy, tok):
    handle = policy["handle"]
    prompt = tok.encode("def relu(x)")
    outs = _generate_many(handle, [(prompt, SamplingParams(max_new_tokens=8))] * 12)
    assert all(isinstance(o, GenerateOutput) and 1 <= len(o.token_ids) <= 8 and o.version == 0 for o in outs)
    stats = handle.broadcast("stats").results(timeout_s=60)
    assert len(stats) == 2
    assert sum(s["requests"] for s in stats) >= 12
    assert max(s["largest_batch"] for s in stats) > 1  # more than one request in one engine call
    assert sum(s["generate_calls"] for s in stats) < sum(s["requests"] for s in stats)


def test_a_bad_request_fails_alone(policy, tok):
    handle = policy["handle"]
    good = handle.generate.remote(tok.encode("relu"), SamplingParams(max_new_tokens=4))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        handle.generate.remote([10**6], {"max_new_tokens": 4}).result(timeout_s=60)
    assert len(good.result(timeout_s=60).token_ids) >= 1


def test_weight_push_is_bit_identical_on_every_replica(policy, tok):
    import ray

    handle = policy["handle"]
    trainer = build_tiny_model(SMALL.model_copy(update={"seed": 5}), tok)
    before = set(handle.broadcast("state_checksum").results(timeout_s=60))
    buckets, manifest = BucketPacker(bucket_bytes=100_000).pack(trainer.state_dict(), version=1)
    refs = [ray.put(b) for b in buckets]
    acks = handle.broadcast("load_weights", 1, refs, manifest).results(timeout_s=60)
    assert len({a["replica"] for a in acks}) == 2 and all(a["version"] == 1 and a["loaded"] for a in acks)
    assert all(a["bytes"] == manifest.total_bytes and a["load_s"] >= 0 for a in acks)
    after = handle.broadcast("state_checksum").results(timeout_s=60)
    assert after == [state_checksum(trainer.state_dict())] * 2 and set(after) != before
    assert handle.broadcast("version").results(timeout_s=60) == [1, 1]
    repeat = handle.broadcast("load_weights", 1, refs, manifest).results(timeout_s=60)  # a retried push
    assert [a["loaded"] for a in repeat] == [False, False]


def test_generation_in_flight_during_a_push_finishes_on_its_own_version(policy, tok):
    """The running batch finishes on the old weights stamped with the old version; the push waits for it."""
    import ray

    handle = policy["handle"]
    assert handle.broadcast("version").results(timeout_s=60) == [1, 1]  # after the previous test's push
    old = build_tiny_model(SMALL.model_copy(update={"seed": 5}), tok)
    new = build_tiny_model(SMALL.model_copy(update={"seed": 6}), tok)
    prompt = tok.encode("import triton")
    sampling = SamplingParams(max_new_tokens=400, temperature=0)  # greedy on the old weights never stops early
    started = sum(s["requests"] for s in handle.broadcast("stats").results(timeout_s=60))
    running = handle.generate.remote(prompt, sampling)
    while sum(s["requests"] for s in handle.broadcast("stats").results(timeout_s=60)) == started:
        time.sleep(0.01)  # until its batch is in the engine (400 tokens take well over a second)
    buckets, manifest = BucketPacker().pack(new.state_dict(), version=2)
    acks = handle.broadcast("load_weights", 2, [ray.put(b) for b in buckets], manifest).results(timeout_s=120)
    out = running.result(timeout_s=120)
    assert out.version == 1 and out.finish_reason == "length" and len(out.token_ids) == 400
    _check_logprobs(old, prompt, out, sampling)  # every token came from the old weights
    assert max(a["wait_s"] for a in acks) > 0.05  # the busy replica's push waited for the running batch
    after = handle.generate.remote(prompt, SamplingParams(max_new_tokens=16)).result(timeout_s=60)
    assert after.version == 2
    _check_logprobs(new, prompt, after, SamplingParams())


def test_openai_chat_completions_over_http(policy, tok):
    url = policy["url"] + "/v1/chat/completions"
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "relu"}],
        "max_tokens": 12,
        "logprobs": True,
        "temperature": 0.7,
        "top_k": 50,
        "n": 2,
        "seed": 3,
    }
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(timeout=120) as client:
        r = client.post(url, json=body, headers=auth)
        assert r.status_code == 200, r.text
        data = r.json()
        prompt = tok.apply_chat_template(body["messages"], add_generation_prompt=True, tokenize=False)
        assert data["object"] == "chat.completion" and data["model"] == "tiny"
        assert data["usage"]["prompt_tokens"] == len(tok.encode(prompt, add_special_tokens=False))
        assert len(data["choices"]) == 2 and data["system_fingerprint"].startswith("policy-v")
        generated = 0
        for choice in data["choices"]:
            content = choice["logprobs"]["content"]
            assert choice["finish_reason"] in ("stop", "length") and isinstance(choice["message"]["content"], str)
            assert all(math.isfinite(t["logprob"]) and t["logprob"] <= 0 for t in content)
            raw = b"".join(bytes(t["bytes"]) for t in content)  # special tokens the model sampled stay visible
            assert raw.decode("utf-8", "replace") == choice["message"]["content"]
            generated += len(content) + (choice["finish_reason"] == "stop")
        assert data["usage"]["completion_tokens"] == generated
        assert data["usage"]["total_tokens"] == data["usage"]["prompt_tokens"] + generated
        assert client.post(url, json=body).status_code == 401
        assert client.post(url, json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
        unknown = client.post(url, json={**body, "frequency_penalty": 0.5}, headers=auth)
        assert unknown.status_code == 422 and "frequency_penalty" in unknown.text
        assert client.post(url, json={**body, "stream": True}, headers=auth).status_code == 422
        assert client.post(url, json={**body, "model": "gpt-4"}, headers=auth).status_code == 404
        assert client.get(policy["url"] + "/healthz").status_code == 200
