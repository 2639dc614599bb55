"""The vLLM engine's pieces that run without a GPU: config -> engine arguments, device and install checks,
the un-fusing of vLLM's packed projections, the shared-memory staging of pushed buckets, and the mapping of
vLLM's completions to GenerateOutput. The engine itself runs in tests/serve_apps/test_vllm_gpu.py (H200)."""

from __future__ import annotations

import importlib
import importlib.util
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from drkernel.config.train import PolicyConfig, TrainConfig
from drkernel.model.weights import state_checksum, unfuse
from serve_apps.policy import max_ongoing_requests
from serve_apps.vllm_engine import (
    EXTENSION,
    VllmEngine,
    _Staging,
    check_engine_device,
    engine_args,
    import_vllm,
)
from serve_apps.vllm_worker import SHM_PREFIX, _Segment


def test_engine_args_follow_the_config():
    cfg = PolicyConfig.model_validate(
        {
            "engine": "vllm",
            "dtype": "bfloat16",
            "vllm": {"max_num_seqs": 64, "kv_cache_memory_gb": 1.5, "max_model_len": 2048, "enforce_eager": True},
        }
    )
    args = engine_args(cfg, "/models/q")
    assert args["model"] == "/models/q" and args["dtype"] == "bfloat16" and args["skip_tokenizer_init"] is True
    assert args["max_num_seqs"] == 64 and args["max_model_len"] == 2048 and args["enforce_eager"] is True
    assert args["kv_cache_memory_bytes"] == int(1.5 * (1 << 30))
    # the sampled token's log-prob under the distribution it was sampled from; the checkpoint's defaults ignored
    assert args["logprobs_mode"] == "processed_logprobs" and args["generation_config"] == "vllm"
    assert args["enable_prefix_caching"] is False
    assert "max_model_len" not in engine_args(PolicyConfig(engine="vllm"), "/m")  # null: the model's own
    module, name = EXTENSION.rsplit(".", 1)
    assert callable(getattr(importlib.import_module(module), name).drkernel_load_shm)


def test_unknown_vllm_keys_are_refused():
    with pytest.raises(ValueError, match="max_num_seq"):
        TrainConfig.model_validate({"policy": {"vllm": {"max_num_seq": 8}}})
    with pytest.raises(ValueError):
        PolicyConfig.model_validate({"vllm": {"gpu_memory_utilization": 1.5}})


def test_device_and_install_checks():
    check_engine_device("vllm", "cuda")
    check_engine_device("vllm_ascend", "npu")
    with pytest.raises(ValueError, match="'vllm' runs on cuda, but policy.device resolves to 'npu'"):
        check_engine_device("vllm", "npu")
    with pytest.raises(ValueError, match="'vllm_ascend' runs on npu"):
        check_engine_device("vllm_ascend", "cuda")
    if importlib.util.find_spec("vllm") is None:  # CI: no vLLM; the error says how to install it
        with pytest.raises(RuntimeError, match=r"pip install -e '\.\[cuda\]'"):
            import_vllm("vllm")
        with pytest.raises(RuntimeError, match=r"requirements-npu\.txt"):
            import_vllm("vllm_ascend")
    else:
        args_cls, llm_cls = import_vllm("vllm")
        assert args_cls.__name__ == "AsyncEngineArgs" and llm_cls.__name__ == "AsyncLLM"


def test_replica_request_slots_follow_the_engine():
    hf = PolicyConfig(max_batch_size=16)
    vl = PolicyConfig(engine="vllm", vllm={"max_num_seqs": 128})
    assert max_ongoing_requests(vl) - max_ongoing_requests(hf) == 128 - 32


def _fuse_like_vllm(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, list[int]]]:
    """vLLM's Qwen3 layout: q/k/v stacked into qkv_proj, gate/up into gate_up_proj (dim 0, in that order)."""
    fused: dict[str, torch.Tensor] = {}
    sizes: dict[str, list[int]] = {}
    for name, t in state.items():
        for packed, parts in (("qkv_proj", ("q_proj", "k_proj", "v_proj")), ("gate_up_proj", ("gate_proj", "up_proj"))):
            if f".{parts[0]}." in name:
                pieces = [state[name.replace(f".{parts[0]}.", f".{p}.")] for p in parts]
                key = name.replace(f".{parts[0]}.", f".{packed}.")
                fused[key], sizes[key] = torch.cat(pieces), [p.shape[0] for p in pieces]
        if not any(f".{p}." in name for p in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")):
            fused[name] = t
    return fused, sizes


def test_unfuse_restores_the_trainer_layout_bit_for_bit():
    cfg = Qwen3Config(
        vocab_size=96,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    state = {k: v.to(torch.bfloat16) for k, v in Qwen3ForCausalLM(cfg).state_dict().items()}
    fused, sizes = _fuse_like_vllm(state)
    assert "model.layers.0.self_attn.qkv_proj.weight" in fused and len(fused) < len(state)
    back = dict(kv for name, t in fused.items() for kv in unfuse(name, t, sizes.get(name)))
    assert state_checksum(back) == state_checksum(state)
    with pytest.raises(ValueError, match="cannot split"):
        unfuse("model.layers.0.self_attn.qkv_proj.weight", fused["model.layers.0.self_attn.qkv_proj.weight"], [64, 32])
    with pytest.raises(ValueError, match="cannot split"):
        unfuse("model.layers.0.mlp.gate_up_proj.weight", fused["model.layers.0.mlp.gate_up_proj.weight"], None)


def test_shared_memory_staging_round_trip_and_cleanup():
    staging = _Staging()
    data = np.arange(1000, dtype=np.uint8)
    name, nbytes = staging.put(0, data)
    assert name.startswith(SHM_PREFIX) and nbytes == 1000
    shm = _Segment(name)  # what the engine process does
    assert bytes(shm.buf[:nbytes]) == data.tobytes()
    shm.close()
    again, _ = staging.put(0, np.zeros(10, dtype=np.uint8))  # smaller bucket: the segment is reused
    assert again == name
    bigger, _ = staging.put(0, np.ones(5000, dtype=np.uint8))  # larger: a new segment, the old one unlinked
    assert bigger != name
    with pytest.raises(FileNotFoundError):
        _Segment(name)
    staging.close()
    with pytest.raises(FileNotFoundError):
        _Segment(bigger)
    with pytest.raises(ValueError, match="not a weight-push segment"):
        _Segment("psm_other_program")


def _completion(tokens, entries, reason):
    return SimpleNamespace(token_ids=tokens, logprobs=entries, finish_reason=reason)


def test_completion_mapping_indexes_the_sampled_id():
    lp = lambda x: SimpleNamespace(logprob=x)  # noqa: E731
    # logprobs=1 would add the top-1 entry beside the sampled one: the sampled id is what counts
    entries = [{5: lp(-0.5), 9: lp(-0.1)}, {7: lp(-2.0)}]
    out = VllmEngine._output(_completion([5, 7], entries, "abort"), version=3)
    assert out.token_ids == [5, 7] and out.logprobs == [-0.5, -2.0]
    assert out.finish_reason == "abort" and out.version == 3
    with pytest.raises(RuntimeError, match="1 log-prob entries for 2 tokens"):
        VllmEngine._output(_completion([5, 7], entries[:1], "stop"), version=0)
    with pytest.raises(RuntimeError, match="finish_reason 'error'"):
        VllmEngine._output(_completion([5], entries[:1], "error"), version=0)
