"""Kill parts of a running training job and check that it holds: prints a table (fault, expected, observed,
verdict).

    python benchmarks/fault_injection.py [--out runs/fault_injection] [--only policy_async,injection,...]

Probes (a private local Ray cluster; the whole-job probes use tests/e2e's tiny recipe, SFT trained once):
- policy_async / policy_sync: kill the only policy replica after step 1's weight push (queue.max_staleness 1 /
  0); the run must reach its 4 steps, the restarted replica must start on a published version (not 0) and end
  bit-identical to the trainer.
- verifier_twice: a verifier actor killed (and restarted by Ray) twice under one sample; the group must go
  back to the line and be trained, nothing retired.
- verifier_down: a verifier that stays dead; the prompt source must name the stop reason after
  rollout.infra_requeues, never retire groups silently.
- stale_policy: a policy serving version 0 while the trainer is at 3 (synchronous mode); the job must say
  "dropped as stale" with the counts and stop at trainer.stall_limit_s.
- injection: candidate text forging chat turns, through the feedback of a real episode with the shipped
  tokenizer; no special-token id may appear inside the feedback text.
- dense_feedback: 6000 characters of token-dense text; the feedback must fit its token budget, never error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "actors"))
sys.path.insert(0, str(REPO / "tests" / "rollout"))
sys.path.insert(0, str(REPO))
os.environ.setdefault("TRITON_INTERPRET", "1")

import ray  # noqa: E402

from drkernel.config.base import load_config  # noqa: E402
from drkernel.config.tiny_recipe import TINY_TASKS as TASKS  # noqa: E402
from drkernel.config.tiny_recipe import tiny_recipe_overrides as recipe_overrides  # noqa: E402
from drkernel.config.train import QueueConfig, RolloutConfig, TrainConfig  # noqa: E402
from drkernel.tasks import library_path  # noqa: E402

Row = tuple[str, str, str, bool]  # fault, expected, observed, held


def recipe(root: Path) -> list[str]:
    overrides = recipe_overrides(root)
    if not (root / "sft" / "config.json").is_file():
        for name in TASKS:
            shutil.copytree(library_path() / name, root / "tasks" / name, dirs_exist_ok=True)
        from drkernel.sft.stage import run_sft_stage

        run_sft_stage(load_config(TrainConfig, None, overrides), log=lambda _: None)
    return overrides


def _replicas(app: str) -> list[str]:
    prefix = f"SERVE_REPLICA::{app}#PolicyReplica#"
    return sorted(
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["namespace"] == "serve" and a["name"].startswith(prefix)
    )


def probe_policy(root: Path, out: Path, staleness: int) -> Row:
    from actors.job import TrainJob
    from serve_apps.policy import policy_handle

    run = out / f"policy_{staleness}"
    shutil.rmtree(run, ignore_errors=True)
    cfg = load_config(
        TrainConfig,
        None,
        [
            *recipe(root),
            f"trainer.output_dir={run}",
            f"queue.max_staleness={staleness}",
            "trainer.total_steps=4",
            "trainer.checkpoint_every=4",
            "rollout.sample_retries=2",
            "trainer.stall_limit_s=600",
        ],
    )
    job, killed = TrainJob(cfg), []

    def killer() -> None:  # after step 1's line: its weight push is done
        metrics = run / "metrics.jsonl"
        while not (metrics.is_file() and metrics.read_text().strip()):
            time.sleep(0.2)
        name = _replicas(cfg.policy.app_name)[0]
        ray.kill(ray.get_actor(name, namespace="serve"), no_restart=True)
        killed.append(name)

    fault = f"policy replica killed after step 1 ({'async' if staleness else 'sync'})"
    expected = "4 steps; restart on version >= 1; checksum = trainer's"
    try:
        job.setup()
        threading.Thread(target=killer, daemon=True).start()
        job.run()
        handle = policy_handle(cfg.policy.app_name)
        (stats,) = handle.broadcast("stats").results(timeout_s=60)
        same = handle.broadcast("state_checksum").results(timeout_s=60) == [ray.get(job.ranks[0].checksum.remote())]
    except Exception as e:  # the probe reports what happened
        return fault, expected, f"{type(e).__name__}: {str(e)[:160]}", False
    finally:
        job.cleanup()
    observed = f"{job.step} steps; restarted on v{stats['started_version']}; checksum {'equal' if same else 'DIFFERS'}"
    return fault, expected, observed, bool(killed) and job.step == 4 and stats["started_version"] >= 1 and same


def _worker_probe(
    tmp: Path, kinds: dict[int, str], rows: int, rollout: RolloutConfig, verifier_setup: Callable[[Any], None]
) -> tuple[Any, ...]:
    from rollout_support import FakePolicy, toy_episode, write_pool
    from test_infra_faults import MortalVerifier

    from actors.prompt_source import PromptSource
    from actors.rollout_worker import RolloutWorker
    from actors.trajectory_queue import TrajectoryQueue

    (tmp / "calls").mkdir(parents=True)
    source = PromptSource.remote(str(write_pool(tmp / "pool.parquet", rows, kinds)), seed=3, num_epochs=1)
    queue = TrajectoryQueue.remote(QueueConfig(groups_per_step=1, max_staleness=3), 1, source)
    policy, verifier = FakePolicy.remote(3), MortalVerifier.remote(str(tmp / "calls"))
    verifier_setup(verifier)
    worker = RolloutWorker.remote("probe", queue, source, policy, verifier, None, rollout, None, toy_episode)
    return source, queue, policy, verifier, worker


def probe_verifier_twice(out: Path) -> Row:
    from rollout_support import train_loop
    from test_infra_faults import ROLLOUT, _doomed_calls

    tmp = out / f"verifier_twice_{uuid.uuid4().hex[:6]}"
    source, queue, policy, verifier, worker = _worker_probe(tmp, {1: "doomed"}, 3, ROLLOUT, lambda v: None)
    kills = []

    def killer() -> None:
        while not _doomed_calls(tmp / "calls"):
            time.sleep(0.05)
        seen = _doomed_calls(tmp / "calls")
        ray.kill(verifier, no_restart=False)
        kills.append(seen[0])
        while not [s for s in _doomed_calls(tmp / "calls")[len(seen) :] if s in seen]:
            time.sleep(0.05)
        ray.kill(verifier, no_restart=False)
        kills.append("again")
        (tmp / "release").write_text("")

    threading.Thread(target=killer, daemon=True).start()

    async def main() -> dict:
        run = asyncio.ensure_future(worker.run.remote())
        result = await train_loop(queue, policy, 3, 1, seed=2, deadline_s=300)
        await run
        return result

    result = asyncio.run(main())
    stats = ray.get(source.stats.remote())
    trained = sorted(g.split("#")[0] for g in result["consumed"])
    for actor in (worker, queue, source, policy, verifier):
        ray.kill(actor)
    observed = f"{len(kills)} kills; trained {len(trained)}/3; requeued {stats['requeued']}; retired {stats['failed']}"
    held = len(kills) == 2 and trained == ["doomed01", "plain00", "plain02"] and stats["failed"] == 0
    return "verifier killed twice under one sample", "group back in line, trained; 0 retired", observed, held


def probe_verifier_down(out: Path) -> Row:
    tmp = out / f"verifier_down_{uuid.uuid4().hex[:6]}"
    rollout = RolloutConfig(num_workers=1, groups_per_worker=1, samples_per_prompt=2, max_turns=1, infra_requeues=2)
    source, queue, policy, verifier, worker = _worker_probe(tmp, {}, 2, rollout, lambda v: ray.kill(v, no_restart=True))
    worker.run.remote()
    deadline = time.monotonic() + 300
    while ray.get(source.stop_reason.remote()) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    reason = ray.get(source.stop_reason.remote()) or "none"
    for actor in (worker, queue, source, policy):
        ray.kill(actor)
    held = "infra_requeues=2" in reason
    return "verifier down for good", "stop reason after 2 requeues", reason[:120], held


def probe_stale_policy(out: Path) -> Row:
    from rollout_support import FakePolicy, SlowVerifier, toy_episode, write_pool

    from actors.job import JobStalled, TrainJob
    from actors.prompt_source import PromptSource
    from actors.rollout_pool import RolloutPool, worker_factory
    from actors.trajectory_queue import TrajectoryQueue

    tmp = out / f"stale_{uuid.uuid4().hex[:6]}"
    tmp.mkdir(parents=True)
    cfg = load_config(
        TrainConfig,
        None,
        [f"trainer.output_dir={tmp}", "queue.max_staleness=0", "queue.groups_per_step=1", "trainer.stall_limit_s=60"],
    )
    job = TrainJob(cfg)
    job.source = PromptSource.remote(str(write_pool(tmp / "pool.parquet", 4)), seed=1)
    job.queue = TrajectoryQueue.remote(cfg.queue, 1, job.source)
    ray.get(job.queue.set_version.remote(3))
    policy, verifier = FakePolicy.remote(1), SlowVerifier.remote(1, slow_p=0.0, fast_s=0.01)
    rollout = RolloutConfig(num_workers=1, groups_per_worker=1, samples_per_prompt=2, max_turns=1)
    factory = worker_factory(job.queue, job.source, policy, verifier, None, rollout, None, toy_episode)
    job.pool = RolloutPool(factory, 1, job.queue, job.source)
    observed = "no stop"
    try:
        asyncio.run(job._run())
    except JobStalled as e:
        observed = str(e)
    finally:
        asyncio.run(job.pool.stop(timeout_s=5.0))
        for actor in (job.queue, job.source, policy, verifier):
            ray.kill(actor)
    held = "dropped as stale" in observed and "dropped_stale=" in observed
    short = observed.split(": ", 1)[-1][:120]
    return "policy serves v0, trainer at v3 (sync)", "stop at limit naming stale drops", short, held


def probe_injection() -> Row:
    from episode_support import Reply, ScriptedEngine, ScriptedVerifier, fenced, ok, rollout_cfg, task_row
    from test_feedback_injection import FORGED

    from drkernel.data.prompts import special_strings
    from drkernel.model.tokenizer import build_tokenizer
    from drkernel.rl.rewards import RewardConfig
    from drkernel.rollout.episode import run_episode
    from drkernel.sft.data import corpus_texts, task_pairs
    from drkernel.tasks import load_tasks
    from drkernel.types.verify_result import ErrorInfo

    tasks = {t.name: t for t in load_tasks()}
    tok = build_tokenizer(corpus_texts(task_pairs([tasks[n] for n in ("add", "relu", "abs", "elu")])), 1024)
    specials = {tok.convert_tokens_to_ids(s) for s in special_strings(tok)} - {tok.unk_token_id}
    verdict = ok(False, error=ErrorInfo(kind="runtime", message=FORGED))
    code = "import torch\nclass ModelNew(torch.nn.Module):\n    pass"
    engine = ScriptedEngine(tok, [Reply(fenced(code)), Reply(fenced(code))])
    traj = asyncio.run(
        run_episode(
            task_row(tasks["add"].reference),
            "g",
            0,
            engine,
            ScriptedVerifier([verdict, ok()]),
            tok,
            rollout_cfg(feedback_max_tokens=400),
            RewardConfig(),
        )
    )
    inside = [t for t in tok.encode(traj.turns[0].feedback, add_special_tokens=False) if t in specials]
    return "forged chat turns in candidate text", "0 special ids in feedback", f"{len(inside)} special ids", not inside


def probe_dense_feedback() -> Row:
    import random

    from episode_support import ok

    from drkernel.model.tokenizer import build_tokenizer
    from drkernel.rollout.episode import budgeted_feedback
    from drkernel.sft.data import corpus_texts, task_pairs
    from drkernel.tasks import load_tasks
    from drkernel.types.verify_result import ErrorInfo

    tasks = {t.name: t for t in load_tasks()}
    tok = build_tokenizer(corpus_texts(task_pairs([tasks[n] for n in ("add", "relu", "abs", "elu")])), 1024)
    rng = random.Random(0)
    text = "".join(chr(rng.randrange(0x4E00, 0x4E00 + 2000)) for _ in range(6000))
    try:
        content = budgeted_feedback(ok(False, error=ErrorInfo(kind="runtime", message=text)), "Model", tok, 256)
        n = len(tok.encode(content["content"], add_special_tokens=False))
        return "6000 chars of token-dense error text", "fits 256 tokens, no error", f"{n} tokens", n <= 256
    except ValueError as e:
        return "6000 chars of token-dense error text", "fits 256 tokens, no error", f"ValueError: {e}"[:120], False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/fault_injection")
    parser.add_argument(
        "--only",
        default="injection,dense_feedback,verifier_twice,verifier_down,stale_policy,policy_async,policy_sync",
    )
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    ray.init(
        address="local",
        num_cpus=16,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests" / "actors")])}},
    )
    import socket

    from ray import serve

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    probes: dict[str, Callable[[], Row]] = {
        "injection": probe_injection,
        "dense_feedback": probe_dense_feedback,
        "verifier_twice": lambda: probe_verifier_twice(out),
        "verifier_down": lambda: probe_verifier_down(out),
        "stale_policy": lambda: probe_stale_policy(out),
        "policy_async": lambda: probe_policy(out / "recipe", out, 1),
        "policy_sync": lambda: probe_policy(out / "recipe", out, 0),
    }
    rows = []
    try:
        for name in args.only.split(","):
            t0 = time.monotonic()
            rows.append((*probes[name](), time.monotonic() - t0))
            print(f"# {name}: {rows[-1]}", flush=True)
    finally:
        serve.shutdown()
        ray.shutdown()
    print(f"\nload average {os.getloadavg()[0]:.1f}")
    print("| fault | expected | observed | verdict | s |")
    print("|---|---|---|---|---|")
    for fault, expected, observed, held, seconds in rows:
        print(f"| {fault} | {expected} | {observed} | {'held' if held else 'FAILED'} | {seconds:.0f} |")
    return 0 if all(r[3] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
