"""Why vLLM's engine child stalled at start (VLLM.md, 2026-12-01): start the offline LLM with its engine in a
child process, after this process has done CPU torch work (a random init, as vllm_smoke.py did), once with
the `fork` start method and once with `spawn`. A child that is not ready within `--wait-s` gets SIGUSR1, which
the handler it inherited through fork turns into a dump of its Python stacks on stderr; the verdict line says
which start method came up.

    VLLM_ENABLE_V1_MULTIPROCESSING=1 python3 benchmarks/vllm_start_probe.py --wait-s 90
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "benchmarks")]


def _start(path: str, method: str) -> None:
    """Child of the probe: CPU torch work in this process, then LLM() whose engine child uses `method`."""
    import torch

    os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = method
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # inherited by a forked engine child
    torch.set_num_threads(8)
    torch.randn(2048, 2048) @ torch.randn(2048, 2048)  # the OpenMP pool now has threads
    from vllm import LLM

    t = time.perf_counter()
    LLM(model=path, skip_tokenizer_init=True, dtype="bfloat16", gpu_memory_utilization=0.2, enforce_eager=True)
    print(f"PROBE {method} ready in {time.perf_counter() - t:.1f}s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wait-s", type=float, default=90)
    args = parser.parse_args()
    from policy_bench import TINY
    from transformers import Qwen3Config, Qwen3ForCausalLM

    verdict = {}
    with tempfile.TemporaryDirectory() as folder:
        Qwen3ForCausalLM(Qwen3Config(**{**TINY, "head_dim": 64, "hidden_size": 256})).save_pretrained(folder)
        for method in ("fork", "spawn"):
            proc = mp.get_context("spawn").Process(target=_start, args=(folder, method))
            proc.start()
            proc.join(args.wait_s)
            if proc.is_alive():
                import psutil

                for child in psutil.Process(proc.pid).children(recursive=True):
                    os.kill(child.pid, signal.SIGUSR1)
                time.sleep(3)
                for child in psutil.Process(proc.pid).children(recursive=True):
                    child.kill()
                proc.kill()
                verdict[method] = f"not ready after {args.wait_s:.0f}s (stacks above)"
            else:
                verdict[method] = f"exit code {proc.exitcode}"
            print(f"PROBE {method}: {verdict[method]}", flush=True)
    print("PROBE " + json.dumps(verdict), flush=True)


if __name__ == "__main__":
    main()
