"""The policy engines side by side on one GPU: tokens/s of the transformers engine, vLLM's offline `LLM`, and
the vLLM engine behind Ray Serve (handle calls, as rollout workers make them) at several numbers of concurrent
requests; the log-prob gap between vLLM's sampled log-probs and the trainer's recompute (bf16 and fp32) with
the share of trajectories the recipe's mismatch rejection would drop; weight-push time into the Serve replica.

Every request: a random prompt of `--prompt-len` ordinary ids, T=1 (top_k 0, top_p 1: the recipe's rollout
setting), up to `--max-new-tokens`, stopping on the model's eos (a random model rarely samples it: all
engines do the same work). vLLM runs with CUDA graphs and torch.compile (production settings).

    python3 benchmarks/vllm_bench.py --shape qwen3-0.6b --out q06.json     # H200 (BENCHMARKS.md)
    python3 benchmarks/vllm_bench.py --shape tiny --out tiny.json
    python3 benchmarks/vllm_bench.py --shape qwen3-8b --skip transformers serve --concurrency 64 \
        --gpu-memory-utilization 0.6                                       # the 8B generation figure
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"  # the engine child of a process that touched CUDA

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from policy_bench import QWEN3_0_6B, TINY  # noqa: E402

from drkernel.config.train import PolicyConfig  # noqa: E402
from drkernel.model.weights import state_checksum  # noqa: E402
from drkernel.rl.mrs import rejection_keep_mask, veto_turn_keep  # noqa: E402
from drkernel.types.sampling import SamplingParams  # noqa: E402
from serve_apps.policy_engine import TransformersEngine, processed_logprobs  # noqa: E402

QWEN3_8B = QWEN3_0_6B | dict(  # the published Qwen3-8B config.json shape (16 GiB of bf16 weights)
    hidden_size=4096,
    intermediate_size=12288,
    num_hidden_layers=36,
    num_attention_heads=32,
    num_key_value_heads=8,
    tie_word_embeddings=False,
)
SHAPES = {"qwen3-0.6b": QWEN3_0_6B, "qwen3-8b": QWEN3_8B, "tiny": TINY}


def _model(shape: dict, seed: int) -> torch.nn.Module:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    with torch.device("cuda"):
        return Qwen3ForCausalLM(Qwen3Config(**shape)).to(torch.bfloat16).eval()


def _prompts(shape: dict, n: int, length: int, seed: int) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    high = min(shape["vocab_size"], 50_000)
    return [torch.randint(3, high, (length,), generator=gen).tolist() for _ in range(n)]


def offline(path: str, shape: dict, args: argparse.Namespace) -> dict:
    """vLLM's offline LLM (engine in its own child, as AsyncLLM does), the reference throughput."""
    from vllm import LLM
    from vllm import SamplingParams as VS
    from vllm.inputs import TokensPrompt

    t = time.perf_counter()
    llm = LLM(
        model=path,
        skip_tokenizer_init=True,
        dtype="bfloat16",
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_model_len=args.max_model_len,
        seed=0,
        logprobs_mode="processed_logprobs",
        generation_config="vllm",
        enable_prefix_caching=False,
    )
    out = {"start_s": round(time.perf_counter() - t, 1)}
    sp = VS(temperature=1.0, max_tokens=args.max_new_tokens, stop_token_ids=[shape["eos_token_id"]], logprobs=0)
    llm.generate([TokensPrompt(prompt_token_ids=p) for p in _prompts(shape, 4, 16, 9)], sp, use_tqdm=False)
    for n in args.concurrency:
        prompts = [TokensPrompt(prompt_token_ids=p) for p in _prompts(shape, n, args.prompt_len, n)]
        t = time.perf_counter()
        res = llm.generate(prompts, sp, use_tqdm=False)
        wall = time.perf_counter() - t
        out[str(n)] = round(sum(len(r.outputs[0].token_ids) for r in res) / wall, 1)
    return out


def transformers_engine(model: torch.nn.Module, shape: dict, args: argparse.Namespace) -> dict:
    engine = TransformersEngine(model, [shape["eos_token_id"]], shape["pad_token_id"])
    sampling = SamplingParams(max_new_tokens=args.max_new_tokens)
    out = {}
    asyncio.run(engine.generate_batch([list(range(3, 19))], [SamplingParams(max_new_tokens=4)]))
    for n in args.concurrency:
        prompts = _prompts(shape, n, args.prompt_len, n)
        torch.cuda.synchronize()
        t = time.perf_counter()
        try:  # generate keeps every step's full-vocabulary scores: 256 x 256 x 152k floats is 37 GiB at once
            res = asyncio.run(engine.generate_batch(prompts, [sampling] * n))
        except torch.OutOfMemoryError:
            out[str(n)] = "out of memory"
            torch.cuda.empty_cache()
            continue
        torch.cuda.synchronize()
        out[str(n)] = round(sum(len(r.token_ids) for r in res) / (time.perf_counter() - t), 1)
    engine.close()
    return out


def _gaps(model: torch.nn.Module, prompts: list[list[int]], outs: list, dtype: torch.dtype) -> dict:
    """Per-token |dlogp| between the engine's log-probs and a teacher-forced recompute in `dtype`, and the
    share of trajectories the recipe's MRS (geometric 0.999/1.001, token veto 1e-4) would reject."""
    model.to(dtype)
    rows, diffs = [], []
    for p, o in zip(prompts, outs):
        ids = torch.tensor([p + o.token_ids], device="cuda")
        with torch.no_grad():
            logits = model(ids).logits[0, len(p) - 1 : -1]
        train = processed_logprobs(logits, SamplingParams()).gather(-1, ids[0, len(p) :, None])[:, 0].float().cpu()
        rows.append((train, torch.tensor(o.logprobs)))
        diffs.append((train - torch.tensor(o.logprobs)).abs())
    model.to(torch.bfloat16)
    width = max(len(t) for t, _ in rows)
    log_ratio = torch.zeros(len(rows), 1, width)
    mask = torch.zeros(len(rows), 1, width, dtype=torch.bool)
    for i, (train, roll) in enumerate(rows):
        log_ratio[i, 0, : len(train)] = train - roll
        mask[i, 0, : len(train)] = True
    kept = rejection_keep_mask(log_ratio, mask, "geometric", 0.999, 1.001).any(dim=(1, 2))
    kept &= veto_turn_keep(log_ratio, mask, 1e-4)[:, 0]
    d = torch.cat(diffs)
    return {
        "max": round(float(d.max()), 5),
        "mean": round(float(d.mean()), 5),
        "mrs_reject_share": round(1 - float(kept.float().mean()), 4),
    }


def serve_engine(path: str, shape: dict, args: argparse.Namespace, trainer_model: torch.nn.Module) -> dict:
    """The vLLM engine in a PolicyReplica: handle calls at each concurrency, parity, weight pushes."""
    import ray
    from ray import serve

    from actors.weight_sync import ServeReplicas, WeightPublisher
    from serve_apps.policy import build_policy_app, policy_handle

    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    ray.init(address="local", include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": pythonpath}})
    cfg = PolicyConfig(
        engine="vllm",
        device="cuda",
        dtype="bfloat16",
        accelerators_per_replica=0.5,
        app_name="bench-vllm",
        route_prefix="/bench-vllm",
        vllm={
            "max_num_seqs": max(args.concurrency),
            "gpu_memory_utilization": args.gpu_memory_utilization,
            "max_model_len": args.max_model_len,
        },
    )
    t = time.perf_counter()
    serve.run(build_policy_app(cfg, path), name=cfg.app_name, route_prefix=cfg.route_prefix)
    out: dict = {"start_s": round(time.perf_counter() - t, 1)}
    handle = policy_handle(cfg.app_name)
    sampling = SamplingParams(max_new_tokens=args.max_new_tokens)
    warm = [handle.generate.remote(p, SamplingParams(max_new_tokens=4)) for p in _prompts(shape, 4, 16, 9)]
    [r.result(timeout_s=300) for r in warm]
    last = None
    for n in args.concurrency:
        prompts = _prompts(shape, n, args.prompt_len, n)
        t = time.perf_counter()
        res = [r.result(timeout_s=600) for r in [handle.generate.remote(p, sampling) for p in prompts]]
        out[str(n)] = round(sum(len(r.token_ids) for r in res) / (time.perf_counter() - t), 1)
        last = (prompts, res)
    prompts, res = last
    k = min(len(prompts), args.parity_rows)
    out["parity_bf16"] = _gaps(trainer_model, prompts[:k], res[:k], torch.bfloat16)
    out["parity_fp32"] = _gaps(trainer_model, prompts[:k], res[:k], torch.float32)
    publisher = WeightPublisher(ServeReplicas(handle, 1), bucket_mb=512, pin_memory=True)
    pushes = []
    for seed in (11, 12, 13):
        state = _model(shape, seed).state_dict()
        report = publisher.publish(state)
        same = handle.state_checksum.remote().result(timeout_s=300) == state_checksum(state)
        pushes.append({"total_s": round(report.total_s, 3), "replica_load_s": round(report.replica_load_s, 3)})
        pushes[-1]["checksum_equal"] = same
        gib = report.bytes / (1 << 30)
    out["push"] = pushes
    out["push_gib"] = round(gib, 3)
    out["push_total_s_median"] = statistics.median(p["total_s"] for p in pushes)
    out["push_load_s_median"] = statistics.median(p["replica_load_s"] for p in pushes)
    serve.delete(cfg.app_name)
    serve.shutdown()
    ray.shutdown()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-0.6b")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    parser.add_argument("--parity-rows", type=int, default=64)
    parser.add_argument("--skip", nargs="*", default=[], choices=["offline", "transformers", "serve"])
    parser.add_argument("--part", nargs=2, help=argparse.SUPPRESS)  # internal: PART FOLDER in a subprocess
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    shape = SHAPES[args.shape]
    if args.part:  # offline vLLM or the transformers engine, in a process of its own
        which, folder = args.part
        if which == "offline":
            part = offline(folder, shape, args)
        else:
            part = transformers_engine(_model(shape, 0), shape, args)
        print("PART " + json.dumps(part), flush=True)
        return
    result: dict = {"shape": args.shape, "concurrency": args.concurrency, "prompt_len": args.prompt_len}
    result["max_new_tokens"] = args.max_new_tokens
    model = _model(shape, 0)
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        for which, key in (("offline", "vllm_offline"), ("transformers", "transformers")):
            if which in args.skip:
                continue  # each in its own process: its GPU memory is gone before the next engine starts
            cmd = [sys.executable, __file__, "--part", which, folder, "--shape", args.shape]
            cmd += ["--concurrency", *map(str, args.concurrency), "--prompt-len", str(args.prompt_len)]
            cmd += ["--max-new-tokens", str(args.max_new_tokens), "--max-model-len", str(args.max_model_len)]
            cmd += ["--gpu-memory-utilization", str(args.gpu_memory_utilization)]
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode:
                raise RuntimeError(f"{which} part failed:\n{run.stderr[-4000:]}")
            result[key] = json.loads(next(x for x in run.stdout.splitlines() if x.startswith("PART "))[5:])
            print(which, result[key], flush=True)
        if "serve" not in args.skip:
            result["vllm_serve"] = serve_engine(folder, shape, args, model)
            print("vllm serve", result["vllm_serve"], flush=True)
    for n in map(str, args.concurrency):
        row = {k: result[k].get(n) for k in ("transformers", "vllm_offline", "vllm_serve") if k in result}
        if "vllm_serve" in result and "vllm_offline" in result:
            row["serve/offline"] = round(result["vllm_serve"][n] / result["vllm_offline"][n], 3)
        if "vllm_serve" in result and isinstance(result.get("transformers", {}).get(n), float):
            row["serve/transformers"] = round(result["vllm_serve"][n] / result["transformers"][n], 2)
        print(f"n={n}: {row}", flush=True)
        result.setdefault("table", {})[n] = row
    text = json.dumps(result, indent=1)
    print(text, flush=True)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
