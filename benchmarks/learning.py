"""Does the RL loop learn? The same job from one warm start with the same seeds: RL arms (one per learning rate)
and a control that cannot learn (trainer.lr=0, everything else equal), several seeds, all jobs at once on one
Ray cluster.

    TRITON_INTERPRET=1 python benchmarks/learning.py [--seeds 0 1 2] [--steps 12] [--lrs 1e-4 3e-4] \\
        [--samples 8] [--groups 4] [--val-samples 64] [--val-every 4] [--parallel 9] [--deadline-s 500] \\
        [--warm-start runs/learning-warm] [--out runs/learning]

With `--taught-wrong` SFT also learns a wrong answer per task (`TAUGHT_WRONG`: the fused solution with one
token's bug), so the warm start is correct about 2 times in 3 and RL has a correct rate to raise as well as a speed;
`--eval-final` runs `drkernel eval` on each final checkpoint with the validation's tasks, samples and seed and puts
its fast@0 / fast@1 beside the job's last `val/fast@0` / `val/fast@1`. The setting where RL beat its control on both
(BENCHMARKS.md, session 11; 3,220 s on the 2-core box at parallel 2, about 500 s a job):

    TRITON_INTERPRET=1 python benchmarks/learning.py --taught-wrong --eval-final --seeds 0 1 2 3 --lrs 1e-4 2e-4 \\
        --steps 8 --samples 8 --groups 2 --temperature 0.8 --val-samples 24 --val-every 4 --parallel 2

On the H200 host (16 CPU cores, the CPU-modelled verifier, the tiny policy on CPU; one call of at most 560 s; the
warm start carried as an ignored folder, 0.5 MB, else made there first: 18 s on this box), not run yet:

    bash .device-site/install.sh >/dev/null 2>&1; tar -C /tmp/site -xJf .device-site/verl.tar.xz; \\
    export PYTHONPATH=/tmp/site:$PWD TRITON_INTERPRET=1; \\
    timeout 530 python3 benchmarks/learning.py --taught-wrong --seeds 0 1 2 3 --lrs 1e-4 --steps 12 --samples 8 \\
        --groups 2 --temperature 0.8 --val-samples 32 --val-every 4 --parallel 8 --deadline-s 470 \\
        --warm-start runs/learning-warm-tw --out $OUT/learning

Every job logs `train/update_logp_pos` / `train/update_logp_neg` (`trainer.measure_update_effect`): the mean
change of a trained turn's summed log-prob made by each step, by the trainer's own forward pass, among positive-
and negative-advantage turns. Positive and negative respectively means the update does what its batch asks; the
summary reports their mean over steps. `--set KEY=VALUE ...` adds overrides to every arm alike.

What makes a difference visible if there is one:
- Seeded sampling (`rollout.seed`): every turn's draw is seeded from (seed, group, sample, turn), so at step 1 an
  RL arm and its control draw *identical* samples (same weights, same prompts), and later steps differ only by
  what training changed. Validation is seeded the same way, so both arms' step-0 validations are one and the
  same numbers (the script checks this) and later validations are paired with the start sample for sample.
- Groups of `--samples` (8) and `--groups` (4) a step, 64 validation samples per task (standard error near 0.06
  on a proportion), and learning rates side by side (`--lrs`) against one control per seed.
- The warm start is built once (`--warm-start`, an SFT checkpoint folder; made there when missing) and shared by
  every job: the tiny recipe's 64-wide Qwen3, SFT on one thread on both solutions of `relu` and `scale_shift`,
  simple and fused (and with `--taught-wrong` the wrong one), for `--sft-epochs` (160). Every answer copies its
  solution at p > 0.9 but for the tokens that choose between the answers; at temperature 1 untaught wrong answers
  are long-tail accidents, whose large negative steps also lower the right answers; `--temperature 0.8` removes
  most of them (benchmarks/warm_start_probe.py measures this per checkpoint and temperature).
- Each job is its own driver process (a TrainJob) on the script's Ray cluster with its own policy and verifier
  Serve apps, `--parallel` of them at once; `--deadline-s` stops jobs still running (they clean up) and the
  summary uses what they logged.

PRS is off (the tiny recipe's `algorithm.prs.enabled=false`): it rejects correct turns by Triton time coverage,
which this verifier does not measure, and with it on every correct turn left the loss (issue 24; TrainConfig now
refuses that combination). The reward is speed-aware: the verifier models H200 time on CPU (`timing: cpu_model`),
which prices the fused kernels faster (relu: simple 0.5x, fused 1.0x the reference; scale_shift: simple 1.0x,
fused 2.0x). Names: `val/fast@p` is `drkernel eval`'s metric, the share of *all* validation samples correct with
speedup > p; `rollout/correct_rate` is the correct share of judged training turns; `rollout/fast1_in_all` the share
of judged training turns correct and modelled faster than 1 (the job's `rollout/fast1` counts among *correct*
turns only and is not used). Prints per learning rate the seeds' RL, control and paired RL - control; writes
results.json and results.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from drkernel.config.base import load_config  # noqa: E402
from drkernel.config.tiny_recipe import tiny_recipe_overrides  # noqa: E402
from drkernel.config.train import TrainConfig  # noqa: E402
from drkernel.tasks import library_path  # noqa: E402

KEYS = ("rollout/correct_rate", "rollout/fast1_in_all", "rollout/reward_mean")
EFFECT_KEYS = ("train/update_logp_pos", "train/update_logp_neg")
VAL_KEYS = ("val/fast@0", "val/fast@1", "val/reward_mean")
EVAL_KEYS = ("val/fast@0", "val/fast@1")  # the job's names; `drkernel eval` reports the same as fast@0, fast@1


# One bug a kernel writer makes, in one token of the task's fused solution, so that the wrong answer and the fused
# one part at that token and nowhere else: what `--taught-wrong` adds to SFT as `solution_wrong.py`.
TAUGHT_WRONG = {
    "relu": ("tl.maximum(x, 0.0)", "tl.minimum(x, 0.0)"),
    "scale_shift": ("x * alpha + beta", "x * alpha - beta"),
}


def recipe(root: Path, tasks: list[str], epochs: int, taught_wrong: bool = False) -> list[str]:
    """The experiment's recipe as overrides: the tiny model, its tasks copied under `root`, a speed-aware
    CPU-modelled verifier; with `taught_wrong`, each task's copy also holds a wrong solution to learn in SFT, so
    the warm start writes it about as often as the fused one and the correct rate has room to rise."""
    for name in tasks:
        copy = root / "tasks" / name
        shutil.copytree(library_path() / name, copy, dirs_exist_ok=True)
        (copy / "solution_wrong.py").unlink(missing_ok=True)
        if not taught_wrong:
            continue
        if name not in TAUGHT_WRONG:
            raise SystemExit(f"--taught-wrong: no wrong answer for {name}; there is one for {sorted(TAUGHT_WRONG)}")
        right, wrong = TAUGHT_WRONG[name]
        fused = (copy / "solution_fused.py").read_text()
        assert fused.count(right) == 1, f"{name}'s fused solution no longer holds {right!r} once"
        (copy / "solution_wrong.py").write_text(fused.replace(right, wrong))
    return [
        *tiny_recipe_overrides(root),
        f"sft.epochs={epochs}",
        "sft.num_threads=1",  # two OpenMP threads spin against each other on a shared box
        "verifier.options.num_correct_trials=1",
        "verifier.options.measure_performance=true",
        "verifier.options.timing=cpu_model",
        "verifier.options.gpu_profile=h200",
        "verifier.options.timeout_s=120",
    ]


def warm_start(folder: Path, overrides: list[str]) -> Path:
    """The SFT checkpoint every job starts from, made once in `folder` (about a minute on one thread)."""
    if (folder / "config.json").is_file():
        return folder
    from drkernel.sft.stage import run_sft_stage

    t0 = time.monotonic()
    run_sft_stage(load_config(TrainConfig, None, [*overrides, f"sft.output_dir={folder}"]), log=lambda _: None)
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    print(f"warm start: SFT in {time.monotonic() - t0:.0f} s, {size / 1e6:.1f} MB at {folder}", flush=True)
    return folder


def run_one(spec_file: Path) -> None:
    """Child mode: one whole job on the parent's Ray cluster; SIGINT or SIGTERM stops it and it still cleans up."""
    import ray

    from actors.job import TrainJob

    spec = json.loads(spec_file.read_text())

    ray.init(
        address=spec["address"],
        log_to_driver=False,
        runtime_env={
            "env_vars": {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        },
    )

    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)  # after ray.init, whose own SIGTERM handler aborts the process
    job = TrainJob(load_config(TrainConfig, None, spec["overrides"]))
    try:
        job.setup()
        job.run()
    finally:
        job.cleanup()
        ray.shutdown()


def read_rows(out: Path) -> list[dict]:
    path = out / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def val_steps(rows: list[dict]) -> set[int]:
    return {int(r["step"]) for r in rows if "val/fast@0" in r}


def trained_steps(rows: list[dict]) -> int:
    return sum(1 for r in rows if r.get("step", 0) >= 1 and "rollout/correct_rate" in r)


def digest(rows: list[dict], val_step: int | None, upto: int) -> dict[str, float]:
    """One run, to compare with another at the same points: validation at step 0 and at `val_step`, rollout
    metrics of step 1 and of the last third of steps 1..`upto` (NaN where the run never got there)."""
    nan = float("nan")
    vals = {int(r["step"]): r for r in rows if "val/fast@0" in r}
    trained = [r for r in rows if 1 <= r.get("step", 0) <= upto and "rollout/correct_rate" in r]
    out: dict[str, float] = {"steps": float(len(trained)), "val end step": float(val_step or 0)}
    for key in VAL_KEYS:
        out[f"{key} start"] = vals[0].get(key, nan) if 0 in vals else nan
        out[f"{key} end"] = vals[val_step].get(key, nan) if val_step else nan
    third = max(1, len(trained) // 3)
    for key in KEYS:
        out[f"{key} step 1"] = trained[0].get(key, nan) if trained else nan
        out[f"{key} last third"] = statistics.mean(r.get(key, 0.0) for r in trained[-third:]) if trained else nan
    for key in EFFECT_KEYS:  # the step's own direction on its batch: > 0 for pos, < 0 for neg when it learns
        out[f"{key} mean of steps"] = statistics.mean(r.get(key, nan) for r in trained) if trained else nan
    return out


def paired(rl_rows: list[dict], control_rows: list[dict]) -> tuple[dict[str, float], dict[str, float]]:
    """Digests of an RL run and its control at the last validation step and training step both reached."""
    common = (val_steps(rl_rows) & val_steps(control_rows)) - {0}
    val_step = max(common) if common else None
    upto = min(trained_steps(rl_rows), trained_steps(control_rows))
    return digest(rl_rows, val_step, upto), digest(control_rows, val_step, upto)


def spread(values: list[float]) -> str:
    values = [v for v in values if v == v]
    if not values:
        return "n/a"
    return f"{statistics.mean(values):+.3f} [{min(values):+.3f}, {max(values):+.3f}]"


def start_cluster(num_cpus: int) -> tuple[str, int]:
    import ray
    from ray import serve

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    for attempt in range(5):  # on a swamped box the raylet can miss Ray's fixed 30 s start window
        try:
            info = ray.init(
                address="local",
                num_cpus=num_cpus,
                include_dashboard=False,
                log_to_driver=False,
                runtime_env={"env_vars": {"PYTHONPATH": path}},
            )
            break
        except Exception as e:
            print(f"Ray did not start (attempt {attempt + 1}): {e}", flush=True)
            ray.shutdown()
    else:
        raise SystemExit("Ray did not start in five attempts")
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    return info.address_info["gcs_address"], port


def run_processes(
    starts: dict[str, Callable[[], subprocess.Popen]], parallel: int, deadline: float = math.inf
) -> Iterator[tuple[str, int | None, float]]:
    """Start each named process, `parallel` at once, and yield (name, return code, wall seconds) as each ends;
    past `deadline` (monotonic) the running ones get SIGINT (their cleanup runs; killed after 30 s) and the ones
    never started are yielded with return code None."""
    waiting = list(starts)
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    while waiting or running:
        while waiting and len(running) < parallel and time.monotonic() < deadline:
            name = waiting.pop(0)
            running[name] = (starts[name](), time.monotonic())
        if time.monotonic() >= deadline:
            for name in waiting:
                yield name, None, 0.0
            waiting = []
            for proc, _ in running.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)  # KeyboardInterrupt: the job's cleanup runs
            for proc, _ in running.values():
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for name, (proc, t0) in list(running.items()):
            if proc.poll() is not None:
                del running[name]
                yield name, proc.returncode, round(time.monotonic() - t0, 1)
        time.sleep(1.0)


def run_jobs(jobs: dict[str, list[str]], root: Path, address: str, parallel: int, deadline: float) -> dict[str, dict]:
    """Every job as a child process, `parallel` at once; past `deadline` (monotonic) the rest are stopped."""
    env = {**os.environ, "RAY_ADDRESS": address}

    def start(name: str) -> subprocess.Popen:
        out = root / name
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        spec = root / f"{name}.json"  # not with_suffix: a rate's dot would be taken for one
        spec.write_text(json.dumps({"address": address, "overrides": [*jobs[name], f"trainer.output_dir={out}"]}))
        log = (root / f"{name}.log").open("w")
        cmd = [sys.executable, __file__, "--run-one", str(spec)]
        return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)

    done: dict[str, dict] = {}
    for name, code, wall in run_processes({n: partial(start, n) for n in jobs}, parallel, deadline):
        if code is None:
            done[name] = {"status": "not started (deadline)", "wall_s": 0.0, "rows": []}
            continue
        status = "ok" if code == 0 else f"exit {code}"
        rows = read_rows(root / name)
        done[name] = {"status": status, "wall_s": wall, "rows": rows}
        print(
            f"{name:18s} {status:8s} {wall:5.0f} s, {trained_steps(rows)} steps, validations at "
            f"steps {sorted(val_steps(rows))}: correct "
            + ", ".join(f"{r['val/fast@0']:.3f}" for r in rows if "val/fast@0" in r),
            flush=True,
        )
    return done


def last_validation(rows: list[dict]) -> dict:
    """The job's last logged validation row (every finished job has step 0's)."""
    return [r for r in rows if "val/fast@0" in r][-1]


def eval_final(
    done: dict[str, dict], jobs: dict[str, list[str]], root: Path, address: str, parallel: int, tasks: list[str], k: int
) -> None:
    """`drkernel eval` of each finished job's final checkpoint, on the validation's tasks, samples (`k`), turns,
    temperature and seed (the job's own overrides; eval names its own apps); the result sits beside the job's own
    last validation (`done[name]["eval"]`)."""
    from drkernel.train.checkpoint import latest_checkpoint

    ckpts = {n: latest_checkpoint(root / n / "checkpoints") for n, r in done.items() if r["status"] == "ok"}
    ckpts = {n: c for n, c in ckpts.items() if c is not None}

    def start(name: str) -> subprocess.Popen:
        out = root / f"{name}-eval"
        shutil.rmtree(out, ignore_errors=True)
        cmd = [
            sys.executable, "-m", "pipelines.cli", "eval", "--policy", str(ckpts[name] / "model"), "--out", str(out),
            "--tasks", ",".join(tasks), "--k", str(k), "--address", address, *jobs[name],
        ]  # fmt: skip
        log = (root / f"{name}-eval.log").open("w")
        return subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)

    for name, code, _ in run_processes({n: partial(start, n) for n in ckpts}, parallel):
        report = root / f"{name}-eval" / "report.json"
        if code != 0 or not report.is_file():
            done[name]["eval"] = {"status": f"exit {code}", "checkpoint": ckpts[name].name}
            continue
        best = json.loads(report.read_text())["summary"]["best"]
        done[name]["eval"] = {"status": "ok", "checkpoint": ckpts[name].name}
        done[name]["eval"].update({key: best[key.removeprefix("val/")] for key in EVAL_KEYS})
        job = last_validation(done[name]["rows"])
        print(
            f"{name:18s} eval of {ckpts[name].name}: "
            + ", ".join(
                f"{key} {done[name]['eval'][key]:.3f} (job's validation at step {job['step']}: {job[key]:.3f})"
                for key in EVAL_KEYS
            ),
            flush=True,
        )


def eval_lines(done: dict[str, dict]) -> list[str]:
    """Each final checkpoint's `drkernel eval` next to the job's own last validation, the same metric by name."""
    lines = [
        "| run | checkpoint | job's last `val/fast@0` / eval `fast@0` | job's last `val/fast@1` / eval `fast@1` |",
        "|---|---|---|---|",
    ]
    for name, r in done.items():
        ev = r.get("eval")
        if ev is None:
            continue
        if ev["status"] != "ok":
            lines.append(f"| {name} | {ev['checkpoint']} | eval {ev['status']} | |")
            continue
        job = last_validation(r["rows"])
        cells = [f"{job[k]:.3f} / {ev[k]:.3f}" for k in EVAL_KEYS]
        lines.append(f"| {name} | {ev['checkpoint']} (validated at step {job['step']}) | {' | '.join(cells)} |")
    return lines


def summarise(done: dict[str, dict], seeds: list[int], lrs: list[float]) -> tuple[dict, list[str]]:
    """Per learning rate: RL, control and paired RL - control over seeds, each as mean [min, max]; every pair is
    compared at the steps both of its runs reached."""
    lines = ["| metric | lr | RL | control | RL - control (paired by seed) |", "|---|---|---|---|---|"]
    table: dict = {}
    for lr in lrs:
        pairs = [paired(done[f"seed{s}-lr{lr:g}"]["rows"], done[f"seed{s}-control"]["rows"]) for s in seeds]
        for key in pairs[0][0]:
            rl = [p[0][key] for p in pairs]
            ctl = [p[1][key] for p in pairs]
            diff = [x - y for x, y in zip(rl, ctl, strict=True)]
            table[f"{key} @ lr {lr:g}"] = {"rl": rl, "control": ctl, "rl_minus_control": diff}
            if key not in ("steps", "val end step"):
                lines.append(f"| `{key}` | {lr:g} | {spread(rl)} | {spread(ctl)} | {spread(diff)} |")
            else:
                lines.append(f"| {key} (per seed) | {lr:g} | {rl} | {ctl} | |")
    return table, lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--lrs", type=float, nargs="+", default=[1e-4, 3e-4], help="one RL arm per rate, per seed")
    ap.add_argument("--samples", type=int, default=8, help="group size n (rollout.samples_per_prompt)")
    ap.add_argument("--groups", type=int, default=4, help="prompt groups per step")
    ap.add_argument("--turns", type=int, default=1, help="1: every sample is a first turn")
    ap.add_argument("--temperature", type=float, default=1.0, help="rollout and validation temperature")
    ap.add_argument("--sft-epochs", type=int, default=160)
    ap.add_argument("--val-samples", type=int, default=64, help="validation samples per task")
    ap.add_argument("--val-every", type=int, default=4, help="validate at step 0 and every this many steps")
    ap.add_argument("--tasks", nargs="+", default=["relu", "scale_shift"])
    ap.add_argument("--taught-wrong", action="store_true", help="SFT also on a wrong answer per task (TAUGHT_WRONG)")
    ap.add_argument("--warm-start", default=None, help="SFT checkpoint folder shared by every job (made if missing)")
    ap.add_argument("--parallel", type=int, default=None, help="jobs at once (default: all)")
    ap.add_argument("--deadline-s", type=float, default=None, help="stop jobs still running after this many seconds")
    ap.add_argument("--verifier-concurrency", type=int, default=4, help="evaluations at once per job's verifier")
    ap.add_argument(
        "--eval-final", action="store_true", help="`drkernel eval` each final checkpoint as the job validated it"
    )
    ap.add_argument("--set", nargs="*", default=[], help="more TrainConfig overrides, the same in every arm")
    ap.add_argument("--out", default="runs/learning")
    ap.add_argument("--run-one", default=None, help=argparse.SUPPRESS)  # child mode (one job)
    a = ap.parse_args()
    if a.run_one:
        run_one(Path(a.run_one))
        return
    t_start = time.monotonic()
    deadline = t_start + (a.deadline_s if a.deadline_s else float("inf"))
    root = Path(a.out).resolve()
    root.mkdir(parents=True, exist_ok=True)
    base = recipe(root / "recipe", a.tasks, a.sft_epochs, a.taught_wrong)
    model = warm_start(Path(a.warm_start or root / "recipe" / "sft").resolve(), base)
    common = [
        *base,
        f"policy.model_path={model}",
        "policy.num_threads=1",
        "policy.device=cpu",  # "auto" would queue every job's policy and trainer for the host's one GPU
        "trainer.device=cpu",
        "verifier.device=cpu",
        f"trainer.total_steps={a.steps}",
        f"trainer.checkpoint_every={a.steps}",
        f"rollout.samples_per_prompt={a.samples}",
        f"rollout.max_turns={a.turns}",
        f"rollout.temperature={a.temperature}",
        f"rollout.groups_per_worker={a.groups}",
        f"queue.groups_per_step={a.groups}",
        "queue.max_staleness=0",  # synchronous: every step's samples come from the weights just pushed
        f"trainer.micro_batch_size={a.samples}",
        "trainer.measure_update_effect=true",
        "rl_data.read_cpus=0.25",
        f"verifier.max_concurrency={a.verifier_concurrency}",
        f"validation.every_steps={a.val_every}",
        f"validation.samples_per_task={a.val_samples}",
        f"validation.tasks=[{','.join(a.tasks)}]",
        "logging.report_samples_per_step=0",
        *a.set,
    ]
    jobs: dict[str, list[str]] = {}
    for seed in a.seeds:
        for arm, lr in [("control", 0.0), *((f"lr{lr:g}", lr) for lr in a.lrs)]:
            name = f"seed{seed}-{arm}"
            jobs[name] = [
                *common,
                f"trainer.lr={lr}",
                f"trainer.seed={seed}",
                f"rl_data.seed={seed}",
                f"rollout.seed={seed}",
                f"policy.app_name=learn-{name}-policy",
                f"policy.route_prefix=/learn-{name}",
                f"verifier.app_name=learn-{name}-verifier",
            ]
    for overrides in jobs.values():  # a bad override fails here, before any job starts
        load_config(TrainConfig, None, overrides)
    import ray
    from ray import serve

    parallel = a.parallel or len(jobs)
    address, port = start_cluster(max(os.cpu_count() or 1, 2 * parallel))
    try:
        print(f"{len(jobs)} jobs, {parallel} at once, on Ray at {address}", flush=True)
        jobs = {n: [*o, f"policy.http_port={port}"] for n, o in jobs.items()}
        done = run_jobs(jobs, root, address, parallel, deadline)
        if a.eval_final:
            eval_final(done, jobs, root, address, parallel, a.tasks, a.val_samples)
    finally:
        serve.shutdown()
        ray.shutdown()
    wall = time.monotonic() - t_start
    table, lines = summarise(done, a.seeds, a.lrs)
    header = (
        f"{len(a.seeds)} seeds, {a.steps} steps, lrs {' '.join(f'{x:g}' for x in a.lrs)}, n={a.samples}, "
        f"{a.groups} groups/step, {a.val_samples} validation samples per task every {a.val_every} steps, "
        f"{wall:.0f} s; mean [min, max] over seeds"
    )
    same = [table[f"val/fast@0 start @ lr {lr:g}"] for lr in a.lrs]
    same = [x == y for t in same for x, y in zip(t["rl"], t["control"], strict=True)]
    check = f"step-0 validation identical in RL and control (seeded): {sum(same)} of {len(same)} pairs"
    status = ", ".join(f"{n} {r['status']} ({r['wall_s']:.0f} s)" for n, r in done.items())
    lines += ["", *eval_lines(done)] if a.eval_final else []
    print("\n".join(["", header, check, status, *lines]), flush=True)
    (root / "results.md").write_text("\n".join([header, "", check, "", status, "", *lines, ""]))
    (root / "results.json").write_text(
        json.dumps({"args": vars(a), "wall_s": wall, "table": table, "runs": done}, indent=2)
    )


if __name__ == "__main__":
    main()
