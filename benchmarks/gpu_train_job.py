"""The training job on one GPU: the tiny recipe of tests/e2e (a 64-wide Qwen3 fitted to two shipped tasks by a
short SFT on the GPU), then the whole job with the transformers engine, the trainer and the verifier sharing the
GPU (0.3 of it each), measured performance and coverage on, four steps with checkpoints. Prints the summary and
per-step metrics; run on the H200 (BENCHMARKS.md, "The training job on the H200").

    python3 benchmarks/gpu_train_job.py [key=value overrides]
"""

from __future__ import annotations

import json
import os
import shutil
import sys
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
)
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
    root = Path("/tmp/drkernel-gpu-recipe")
    shutil.rmtree(root, ignore_errors=True)
    for name in TASKS:
        shutil.copytree(library_path() / name, root / "tasks" / name)
    out = Path(os.environ.get("OUT", "/tmp")) / "run"
    t0 = time.time()
    run_sft_stage(
        load_config(TrainConfig, None, recipe_overrides(root) + ["sft.device=cuda", "sft.epochs=150"]),
        log=lambda _: None,
    )
    print(f"sft on cuda: {time.time() - t0:.1f} s", flush=True)
    cfg = load_config(TrainConfig, None, recipe_overrides(root) + GPU + [f"trainer.output_dir={out}"] + argv)
    t0 = time.time()
    summary = TrainJob(cfg).main()
    print(f"job wall {time.time() - t0:.1f} s")
    print(json.dumps({k: v for k, v in summary.items() if k != "trained_group_ids"}, indent=1))
    for line in (out / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        print({k: round(v, 4) for k, v in row.items() if k in SHOWN})
    print(sorted(p.name for p in (out / "checkpoints").iterdir()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
