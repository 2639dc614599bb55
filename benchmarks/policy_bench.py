"""Tokens/s of the policy engine (TransformersEngine: padded batched generate + log-probs) at several
numbers of concurrent sequences, for a checkpoint folder or a random-init Qwen3-0.6B shape.

Every sequence gets a random prompt of `--prompt-len` ids and samples at T=1 (top_k 0, top_p 1, the
recipe's rollout setting) up to `--max-new-tokens`; a random-init model almost never samples its stop token,
so all rows run to the budget and tokens/s is the padded-generate ceiling. With a trained checkpoint rows
stop early and "tokens/s" counts the tokens actually returned. Each row also reports the largest
|engine log-prob - teacher-forced log-prob| of one sequence (fp32: ~1e-6; bf16: the dtype's noise).

    python benchmarks/policy_bench.py --qwen3-0.6b --device cuda --dtype bfloat16            # H200
    python benchmarks/policy_bench.py --model-path runs/sft --device cuda
    python benchmarks/policy_bench.py --tiny --device cpu --concurrency 1 4 --max-new-tokens 32   # smoke
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from drkernel.types.sampling import SamplingParams  # noqa: E402
from serve_apps.policy_engine import TORCH_DTYPES, TransformersEngine, processed_logprobs  # noqa: E402

QWEN3_0_6B = dict(  # the published Qwen3-0.6B config.json shape
    vocab_size=151936,
    hidden_size=1024,
    intermediate_size=3072,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=40960,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
    eos_token_id=151645,
    pad_token_id=151643,
)
TINY = dict(
    vocab_size=2048,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    max_position_embeddings=4096,
    tie_word_embeddings=True,
    eos_token_id=2,
    pad_token_id=0,
)


def _random_engine(shape: dict, device: str, dtype: str) -> TransformersEngine:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3ForCausalLM(Qwen3Config(**shape)).to(TORCH_DTYPES[dtype])
    return TransformersEngine(model, [shape["eos_token_id"]], shape["pad_token_id"])


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _max_logprob_error(
    engine: TransformersEngine, prompt: list[int], tokens: list[int], logprobs: list[float]
) -> float:
    with torch.no_grad():
        ids = torch.tensor([prompt + tokens], device=engine.device)
        logits = engine.model(ids).logits[0, len(prompt) - 1 : -1]
    ref = processed_logprobs(logits, SamplingParams()).gather(-1, torch.tensor(tokens, device=logits.device)[:, None])
    return float((ref[:, 0].cpu() - torch.tensor(logprobs)).abs().max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--model-path", help="HF checkpoint folder (model + tokenizer)")
    which.add_argument("--qwen3-0.6b", dest="qwen", action="store_true", help="random-init Qwen3-0.6B shape")
    which.add_argument("--tiny", action="store_true", help="random-init tiny shape (smoke test)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="bfloat16", choices=sorted(TORCH_DTYPES))
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--prompt-len", type=int, default=256)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    start = time.perf_counter()
    if args.model_path:
        engine = TransformersEngine.from_pretrained(args.model_path, args.device, args.dtype, args.threads)
    else:
        engine = _random_engine(QWEN3_0_6B if args.qwen else TINY, args.device, args.dtype)
    params = sum(p.numel() for p in engine.model.parameters())
    print(
        json.dumps(
            {
                "model": args.model_path or ("qwen3-0.6b-random" if args.qwen else "tiny-random"),
                "params": params,
                "device": str(engine.device),
                "dtype": args.dtype,
                "torch": torch.__version__,
                "load_s": round(time.perf_counter() - start, 2),
            }
        ),
        flush=True,
    )
    gen = torch.Generator().manual_seed(1)
    high = min(engine.vocab_size, 50_000)  # ordinary ids, no special tokens in the prompt
    sampling = SamplingParams(temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=args.max_new_tokens)
    asyncio.run(engine.generate_batch([list(range(1, 9))], [sampling.model_copy(update={"max_new_tokens": 4})]))
    for n in args.concurrency:
        prompts = [torch.randint(3, high, (args.prompt_len,), generator=gen).tolist() for _ in range(n)]
        _sync(args.device)
        t0 = time.perf_counter()
        outs = asyncio.run(engine.generate_batch(prompts, [sampling] * n))
        _sync(args.device)
        wall = time.perf_counter() - t0
        tokens = sum(len(o.token_ids) for o in outs)
        err = _max_logprob_error(engine, prompts[0], outs[0].token_ids, outs[0].logprobs)
        print(
            json.dumps(
                {
                    "concurrency": n,
                    "prompt_len": args.prompt_len,
                    "max_new_tokens": args.max_new_tokens,
                    "tokens": tokens,
                    "wall_s": round(wall, 3),
                    "tokens_per_s": round(tokens / wall, 1),
                    "stopped_early": sum(o.finish_reason == "stop" for o in outs),
                    "max_abs_logprob_err_row0": err,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
