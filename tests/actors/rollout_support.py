"""Stand-ins for the policy and verifier deployments (same method names, real Ray actors), a small episode
function with run_episode's signature, a prompt pool on parquet and a trainer loop. What is under test is the
queue, the prompt source, the workers and the pool, so these stay small but really asynchronous."""

from __future__ import annotations

import asyncio
import random
import sys
import time
from pathlib import Path
from typing import Any

import ray

from drkernel.data.reader import write_rows
from drkernel.types.sampling import GenerateOutput, SamplingParams
from drkernel.types.task_row import TaskRow, parse_row
from drkernel.types.trajectory import Trajectory, Turn

# Ray workers cannot import this test helper by name: ship its code with the functions and classes.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
TINY = dict(hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=32, intermediate_size=128)


def record(i: int, kind: str = "plain") -> dict[str, Any]:
    return {
        "data_source": "test",
        "prompt": [{"role": "user", "content": f"{kind} task {i}"}],
        "reward_model": {"ground_truth": f"# reference {i}\n", "style": "rule"},
        "extra_info": {"entry_point": "Model", "uuid": f"{kind}{i:02d}"},
    }


def tiny_checkpoint(path: Path) -> str:
    """A small HF model and tokenizer saved at `path`: what a trainer rank loads when the test trains little."""
    from drkernel.config.sft import TinyModelConfig
    from drkernel.model.tiny import build_tiny_model
    from drkernel.model.tokenizer import build_tokenizer

    tok = build_tokenizer(["def relu(x): return x * (x > 0)", "import triton"] * 4, vocab_size=300)
    build_tiny_model(TinyModelConfig(**TINY), tok).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def write_pool(path: Path, n: int, kinds: dict[int, str] | None = None) -> Path:
    kinds = kinds or {}
    write_rows([parse_row(record(i, kinds.get(i, "plain"))) for i in range(n)], path)
    return path


@ray.remote(num_cpus=0)
class FakePolicy:
    """generate() answers after a short random delay, stamped with the version the fake trainer last set."""

    def __init__(self, seed: int = 0):
        self._version = 0
        self._rng = random.Random(seed)

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams | dict) -> GenerateOutput:
        sampling = sampling if isinstance(sampling, SamplingParams) else SamplingParams.model_validate(sampling)
        version = self._version  # the weights the request started on
        await asyncio.sleep(self._rng.uniform(0.0, 0.01))
        n = sampling.max_new_tokens
        return GenerateOutput(token_ids=[7] * n, logprobs=[-0.5] * n, finish_reason="length", version=version)

    async def set_version(self, version: int) -> None:
        self._version = version


@ray.remote(num_cpus=0)
class SlowVerifier:
    """verify() with adversarial random latency (mostly fast, sometimes very slow). A sample of a 'flaky'
    task raises on its first call, one of a 'poison' task on every call."""

    def __init__(self, seed: int = 0, slow_p: float = 0.1, slow_s: float = 0.4, fast_s: float = 0.03):
        self._rng = random.Random(seed)
        self._slow_p, self._slow_s, self._fast_s = slow_p, slow_s, fast_s
        self._seen: set[str] = set()
        self.calls = 0

    async def verify(self, reference: str, candidate: str, options: Any = None) -> dict:
        self.calls += 1
        slow = self._rng.random() < self._slow_p
        await asyncio.sleep(self._rng.uniform(0, self._slow_s if slow else self._fast_s))
        sample = candidate.rsplit("/", 1)[0]  # kind/group/sample: a flaky sample fails once, then never
        if candidate.startswith("poison") or (candidate.startswith("flaky") and sample not in self._seen):
            self._seen.add(sample)
            raise RuntimeError(f"verifier replica lost while checking {candidate}")
        return {"correct": True, "compiled": True, "hack": None}

    async def num_calls(self) -> int:
        return self.calls


async def toy_episode(
    task: TaskRow, group_id: str, sample_index: int, generate, verify, tokenizer, cfg, reward_cfg
) -> Trajectory:
    """run_episode's signature and token bookkeeping, minus the real prompts: T turns of generate + verify."""
    kind = task.prompt[-1].content.split()[0]
    if kind == "sleepy":
        await asyncio.sleep(60)
    traj = Trajectory(group_id=group_id, sample_index=sample_index, task_uid=task.task_uuid, prompt_ids=[1, 2, 3])
    for turn in range(cfg.max_turns):
        out = await generate(traj.prompt_ids + traj.response_ids, SamplingParams(max_new_tokens=4))
        start = len(traj.response_ids)
        traj.response_ids += out.token_ids
        traj.response_mask += [1] * len(out.token_ids)
        traj.response_logprobs += out.logprobs
        verdict = await verify(task.reference_code, f"{kind}/{group_id}/{sample_index}/{turn}", task.entry_point)
        traj.turns.append(
            Turn(
                index=turn,
                start=start,
                end=len(traj.response_ids),
                policy_version=out.version,
                finish_reason=out.finish_reason,
                text="",
                code="x",
                verdict=verdict,
                reward=1.0,
            )
        )
        traj.response_ids += [9, 9]  # feedback tokens
        traj.response_mask += [0, 0]
        traj.response_logprobs += [0.0, 0.0]
    traj.end_reason = "max_turns"
    traj.check_aligned()
    return traj


async def train_loop(
    queue,
    policy,
    expected: int,
    batch_size: int,
    seed: int = 0,
    step_s: float = 0.02,
    stall_s: float = 180.0,
    on_batch=None,
) -> dict[str, Any]:
    """A fake trainer: take batches until `expected` groups were consumed or dropped, pushing a new version
    (policy first, then the queue, as the weight publisher does) after every batch. Records each consumed
    group's lag (version at consumption - oldest version in it) and the queue's budget invariant. Starvation is
    `stall_s` without one more group settled (a wait for progress, so a loaded machine only slows it)."""
    rng = random.Random(seed)
    version, consumed, lags, budget_ok = 0, [], [], True
    progress, last_settled = time.monotonic(), -1
    while True:
        stats = await queue.stats.remote()
        budget_ok &= stats["accepted"] + stats["running"] <= stats["budget"]
        settled = len(consumed) + stats["dropped"] + stats["failed"]
        if settled >= expected:
            return {"consumed": consumed, "lags": lags, "budget_ok": budget_ok, "stats": stats, "version": version}
        if settled > last_settled:
            progress, last_settled = time.monotonic(), settled
        elif time.monotonic() - progress > stall_s:
            raise AssertionError(f"trainer starved: {len(consumed)} of {expected} consumed; {stats}")
        # The end of the data may leave less than a batch: take the rest once nothing else can arrive.
        last = stats["running"] == 0 and settled + stats["ready"] >= expected and stats["ready"] < batch_size
        batch = await queue.get_batch.remote(stats["ready"] if last and stats["ready"] else batch_size, 0.5)
        if not batch:
            continue
        for group in batch:
            consumed.append(group.group_id)
            lags.append(version - group.min_version)
            assert all(t.turns and t.min_version >= group.issued_version for t in group.trajectories)
        if on_batch is not None:
            await on_batch(len(consumed))
        await asyncio.sleep(rng.uniform(0, step_s))
        version += 1
        await policy.set_version.remote(version)
        await queue.set_version.remote(version)
