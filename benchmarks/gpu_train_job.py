"""The training job on one GPU: the tiny recipe of tests/e2e (a Qwen3 fitted to two shipped tasks by a short SFT
on the GPU), then the whole job, the policy engine, the trainer and the verifier sharing the GPU (0.3 of it
each), measured performance and coverage on, four steps with checkpoints. Prints the summary, the per-step
metrics and the most GPU memory each role's processes held (nvidia-smi, sampled every second); run on the H200
(BENCHMARKS.md, "The training job on the H200").

    python3 benchmarks/gpu_train_job.py [--shape tiny|qwen3-0.6b] [key=value overrides]

--shape qwen3-0.6b: the policy has Qwen3-0.6B's shape (28 layers, width 1024, vocabulary 151,936 of which the
project's tokenizer uses its first ids), warm-started by the project's SFT on the GPU, trained with fp32 master
weights and bf16 compute (FSDP2 on one rank); add policy.engine=vllm for the production engine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


from actors.job import TrainJob  # noqa: E402
from drkernel.config.base import load_config  # noqa: E402
from drkernel.config.tiny_recipe import TINY_TASKS as TASKS  # noqa: E402
from drkernel.config.tiny_recipe import tiny_recipe_overrides as recipe_overrides  # noqa: E402
from drkernel.config.train import TrainConfig  # noqa: E402
from drkernel.sft.stage import run_sft_stage  # noqa: E402
from drkernel.tasks import library_path  # noqa: E402

SHOWN = (
    "step",
    "rollout/reward_mean",
    "rollout/format_rate",
    "rollout/compile_rate",
    "rollout/correct_rate",
    "rollout/coverage_mean",
    "throughput/tokens_per_s",
    "weight_sync/total_s",
    "train/grad_norm",
    "time/step_s",
    "rollout/verifier_s_per_call",
    "staleness/max",
    "time/generate_s",
    "time/verify_s",
    "time/train_s",
    "verifier/evaluations_per_s",
    "verifier/queue_wait_s_per_call",
    "mrs/turn_rejected_fraction",
    "memory/trainer_peak_gib",
)
QWEN3_0_6B = [  # the published Qwen3-0.6B config.json shape; SFT sized to fit it to the two tasks in minutes
    "model.hidden_size=1024",
    "model.num_layers=28",
    "model.num_heads=16",
    "model.num_kv_heads=8",
    "model.head_dim=128",
    "model.intermediate_size=3072",
    "model.vocab_size=151936",
    "model.rope_theta=1000000",
    "sft.lr=5e-4",
    "sft.warmup_steps=10",
    "trainer.compute_dtype=bfloat16",
    "trainer.lr=1e-6",
    "policy.dtype=bfloat16",
]
ROLES = {"Trainer": "trainer", "Policy": "policy", "EngineCore": "policy", "Verifier": "verifier", "fork": "verifier"}


class GpuMemory(threading.Thread):
    """The most GPU memory each role's processes held together, from nvidia-smi's per-process figures."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_mib: dict[str, int] = {}
        self.stop = threading.Event()

    def _role(self, pid: str, name: str) -> str:
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            title = name  # another pid namespace: the name nvidia-smi saw
        return next((role for key, role in ROLES.items() if key in title), f"other ({title[:40]})")

    def run(self) -> None:
        query = ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader,nounits"]
        while not self.stop.wait(1.0):
            try:
                rows = subprocess.run(query, capture_output=True, text=True, timeout=10).stdout.splitlines()
            except (OSError, subprocess.TimeoutExpired):
                continue
            now: dict[str, int] = {}
            for row in rows:
                pid, name, mib = (part.strip() for part in row.rsplit(",", 2)) if row.count(",") >= 2 else ("", "", "0")
                role = self._role(pid, name)
                now[role] = now.get(role, 0) + int(mib or 0)
            for role, mib in now.items():
                self.peak_mib[role] = max(self.peak_mib.get(role, 0), mib)


GPU = [
    "policy.device=cuda",
    "trainer.device=cuda",
    "verifier.device=cuda",
    "policy.accelerators_per_replica=0.3",
    "trainer.accelerators_per_worker=0.3",
    "verifier.accelerators_per_replica=0.3",
    "trainer.total_steps=4",
    "rollout.samples_per_prompt=4",
    "queue.groups_per_step=2",
    "verifier.options.measure_performance=true",
    "verifier.options.measure_coverage=true",
    "verifier.options.num_correct_trials=3",
    "trainer.checkpoint_every=2",
    "policy.max_batch_size=32",
    "rollout.groups_per_worker=4",
    "rollout.temperature=0.7",
]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=["tiny", "qwen3-0.6b"], default="tiny")
    parser.add_argument("--sft-epochs", type=int, default=150)
    args, argv = parser.parse_known_args(argv)
    shape = QWEN3_0_6B if args.shape == "qwen3-0.6b" else []
    root = Path("/tmp/drkernel-gpu-recipe")
    shutil.rmtree(root, ignore_errors=True)
    for name in TASKS:
        shutil.copytree(library_path() / name, root / "tasks" / name)
    out = Path(os.environ.get("OUT", "/tmp")) / "run"
    t0 = time.time()
    run_sft_stage(
        load_config(
            TrainConfig, None, recipe_overrides(root) + shape + ["sft.device=cuda", f"sft.epochs={args.sft_epochs}"]
        ),
        log=lambda _: None,
    )
    print(f"sft on cuda: {time.time() - t0:.1f} s", flush=True)
    cfg = load_config(TrainConfig, None, recipe_overrides(root) + shape + GPU + [f"trainer.output_dir={out}"] + argv)
    memory = GpuMemory()
    memory.start()
    t0 = time.time()
    try:
        summary = TrainJob(cfg).main()
    finally:
        memory.stop.set()
    print(f"job wall {time.time() - t0:.1f} s")
    print("GPU memory per role, most held at once (MiB):", json.dumps(memory.peak_mib))
    print(json.dumps({k: v for k, v in summary.items() if k != "trained_group_ids"}, indent=1))
    for line in (out / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        print({k: round(v, 4) for k, v in row.items() if k in SHOWN})
    print(sorted(p.name for p in (out / "checkpoints").iterdir()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
