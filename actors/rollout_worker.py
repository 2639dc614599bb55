"""Rollout workers: take admitted prompt groups and sample each n times, all episodes concurrent.

A worker runs `groups_per_worker` slots. Each slot loops: ask the trajectory queue for a slot (admission),
take the next group from the prompt source, run the group's n episodes concurrently against the policy and
verifier handles, and put the finished group. The episode function is injected (default
drkernel.rollout.episode.run_episode), so the loop is tested on its own.

Failures. A sample whose episode raises (an engine or verifier replica lost, a bug) is retried
`rollout.sample_retries` times; past that the group is failed: its sibling episodes are cancelled and
awaited, its slot is freed and the prompt source reports it (it is not re-issued: a prompt that always breaks
the episode must not loop forever). When every failure of that sample was an infrastructure fault (a policy
or verifier replica dying, Serve having no replica, an object lost with its node), the group was never
judged: it goes back to the line instead (prompt source `requeue`, at most `rollout.infra_requeues` times,
then the job stops saying why), and the slot backs off before its next group so a service being restarted
is not hammered. Verdicts that are infrastructure errors are not failures here: the episode masks those
samples. `stop()` cancels every slot and every episode and waits for them, so no task
outlives the worker's loop; the worker's in-flight groups go back to the prompt source.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import ray
from ray.exceptions import ObjectLostError, RayActorError
from ray.serve.exceptions import RayServeException

from drkernel.config.train import RolloutConfig
from drkernel.config.verifier import VerifyOptions
from drkernel.rl.rewards import RewardConfig
from drkernel.types.group import FinishedGroup, PromptGroup
from drkernel.types.sampling import GenerateOutput, SamplingParams
from drkernel.types.trajectory import Trajectory
from drkernel.types.verify_result import VerifyResult
from serve_apps.runtime.run_series import WORKER_SERIES, RunGauges
from serve_apps.verifier import verify_task

log = logging.getLogger(__name__)

GenerateFn = Callable[[list[int], SamplingParams], Awaitable[GenerateOutput]]
VerifyFn = Callable[[str, str, str], Awaitable[VerifyResult]]  # (reference, candidate, entry_point) -> verdict


class EpisodeFn(Protocol):
    def __call__(
        self,
        task: Any,
        group_id: str,
        sample_index: int,
        generate: GenerateFn,
        verify: VerifyFn,
        tokenizer: Any,
        cfg: RolloutConfig,
        reward_cfg: RewardConfig,
    ) -> Awaitable[Trajectory]: ...


# Faults of the job's own services, never of the candidate: its timeouts, crashes and errors are verdicts.
INFRA_FAULTS = (RayActorError, RayServeException, ObjectLostError)
INFRA_BACKOFF_S = (1.0, 30.0)  # a slot's wait after an infra-failed group, doubling per consecutive one, capped


class GroupFailed(RuntimeError):
    """A sample of the group failed past its retries."""


class GroupInfraFailed(GroupFailed):
    """A sample of the group failed past its retries, every time for an infrastructure fault."""


@ray.remote(num_cpus=0)
class RolloutWorker:
    """One rollout actor; `run()` returns when the prompts are exhausted or `stop()` is called."""

    def __init__(
        self,
        worker_id: str,
        queue: ray.actor.ActorHandle,
        prompt_source: ray.actor.ActorHandle,
        policy: Any,
        verifier: Any,
        tokenizer: Any,
        cfg: RolloutConfig | dict[str, Any],
        reward_cfg: RewardConfig | dict[str, Any] | None = None,
        episode_fn: EpisodeFn | None = None,
        admit_poll_s: float = 1.0,
        verify_options: VerifyOptions | dict[str, Any] | None = None,
        verify_delay_s: float = 0.0,
        run: str = "",
    ):
        if episode_fn is None:
            from drkernel.rollout.episode import run_episode

            episode_fn = run_episode
        self.worker_id = worker_id
        self.cfg = cfg if isinstance(cfg, RolloutConfig) else RolloutConfig.model_validate(cfg)
        self.reward_cfg = (
            reward_cfg if isinstance(reward_cfg, RewardConfig) else RewardConfig.model_validate(reward_cfg or {})
        )
        self._queue, self._source = queue, prompt_source
        self._policy, self._verifier, self._tokenizer = policy, verifier, tokenizer
        self._episode = episode_fn
        self._verify_options = (
            verify_options
            if isinstance(verify_options, VerifyOptions)
            else (VerifyOptions.model_validate(verify_options or {}))
        )
        self._verify_delay_s = verify_delay_s  # benchmarks: a slower verifier without a slower machine
        self._admit_poll_s = admit_poll_s
        self._slots: list[asyncio.Task] = []
        self._episodes: set[asyncio.Task] = set()  # live episode tasks (stats: 0 once a group is done)
        self._running = False
        self._stopping = False
        self._counts = {
            "groups": 0,
            "duplicates": 0,
            "failed_groups": 0,
            "infra_requeued": 0,
            "samples": 0,
            "sample_errors": 0,
        }
        self._errors: list[str] = []
        self._gauges = RunGauges("worker", WORKER_SERIES, run, worker=worker_id)

    def _count(self, key: str) -> None:
        """One more of `key`, on the dashboard too (with the episodes running now)."""
        self._counts[key] += 1
        self._gauges.set({**self._counts, "live_episodes": len(self._episodes)})

    async def _generate(self, prompt_ids: list[int], sampling: SamplingParams) -> GenerateOutput:
        out = await self._policy.generate.remote(prompt_ids, sampling)
        return out if isinstance(out, GenerateOutput) else GenerateOutput.model_validate(out)

    async def _verify(self, reference: str, candidate: str, entry_point: str) -> VerifyResult:
        """The job's verifier deployment, with the job's options for this task's entry point: an unpriced verdict
        (the episode prices it with the rollout's reward config)."""
        if self._verify_delay_s:
            await asyncio.sleep(self._verify_delay_s)
        return await verify_task(self._verifier, reference, candidate, entry_point, self._verify_options)

    async def _sample(self, group: PromptGroup, index: int) -> Trajectory:
        """One episode, retried on an exception (cancellation is never retried)."""
        infra_only = True
        for attempt in range(self.cfg.sample_retries + 1):
            try:
                trajectory = await self._episode(
                    group.task,
                    group.group_id,
                    index,
                    self._generate,
                    self._verify,
                    self._tokenizer,
                    self.cfg,
                    self.reward_cfg,
                )
                self._count("samples")
                return trajectory
            except Exception as e:  # any episode failure is retried, then fails the group
                self._count("sample_errors")
                infra_only = infra_only and isinstance(e, INFRA_FAULTS)
                message = f"{group.group_id}/{index} attempt {attempt + 1}: {type(e).__name__}: {e}"
                self._errors = (self._errors + [message])[-20:]
                log.warning("rollout worker %s: %s", self.worker_id, message)
                last = e
        raise (GroupInfraFailed if infra_only else GroupFailed)(
            f"sample {index} of {group.group_id} failed {self.cfg.sample_retries + 1} times: "
            f"{type(last).__name__}: {last}"
        ) from last

    async def _run_group(self, group: PromptGroup) -> list[Trajectory]:
        """The n episodes of a group, concurrently; on a failure or cancellation none is left running."""
        tasks = [asyncio.create_task(self._sample(group, i)) for i in range(self.cfg.samples_per_prompt)]
        for task in tasks:
            self._episodes.add(task)
            task.add_done_callback(self._episodes.discard)
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            failed = [t for t in tasks if t.done() and t.exception() is not None]
            if failed:
                raise failed[0].exception()
            return [t.result() for t in tasks]
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _slot(self) -> None:
        """Admission -> group -> episodes -> put, until stopped or out of prompts."""
        infra_streak = 0
        while not self._stopping:
            admission = await self._queue.try_admit.remote(self.worker_id, self._admit_poll_s)
            if admission is None:
                continue
            group = await self._source.next_group.remote(self.worker_id, admission.version)
            if group is None:
                await self._queue.release.remote(admission.ticket, "unused")
                return
            start = time.monotonic()
            try:
                trajectories = await self._run_group(group)
            except GroupInfraFailed as e:
                self._count("infra_requeued")
                await self._queue.requeue.remote(admission.ticket, group.group_id, str(e), self.cfg.infra_requeues)
                infra_streak += 1
                await asyncio.sleep(min(INFRA_BACKOFF_S[0] * 2 ** (infra_streak - 1), INFRA_BACKOFF_S[1]))
                continue
            except GroupFailed as e:
                self._count("failed_groups")
                await self._queue.fail.remote(admission.ticket, group.group_id, str(e))
                continue
            infra_streak = 0
            finished = FinishedGroup.of(group, trajectories, admission.ticket, self.worker_id)
            finished.metrics["rollout_s"] = time.monotonic() - start
            kept = await self._queue.put.remote(finished)
            self._count("groups" if kept else "duplicates")

    async def run(self) -> dict[str, Any]:
        """Run the slots; returns this worker's stats when the prompts run out or after `stop()`. A slot that
        breaks (e.g. the queue is gone) stops the others and raises: the pool then replaces this worker."""
        if self._running:
            raise RuntimeError(f"rollout worker {self.worker_id} is already running")
        self._running = True
        self._slots = [asyncio.create_task(self._slot()) for _ in range(self.cfg.groups_per_worker)]
        try:
            await asyncio.wait(self._slots, return_when=asyncio.FIRST_EXCEPTION)
            for slot in self._slots:
                if slot.done() and not slot.cancelled() and slot.exception() is not None:
                    raise slot.exception()
        finally:
            for slot in self._slots:
                slot.cancel()
            await asyncio.gather(*self._slots, return_exceptions=True)
            self._running = False
        return await self.stats()

    async def stop(self) -> None:
        """Cancel every slot and episode, wait for them, and hand this worker's groups back."""
        self._stopping = True
        for slot in self._slots:
            slot.cancel()
        await asyncio.gather(*self._slots, return_exceptions=True)
        await self._queue.release_worker.remote(self.worker_id)
        await self._source.reissue.remote(self.worker_id)

    async def stats(self) -> dict[str, Any]:
        live_slots = sum(1 for slot in self._slots if not slot.done())
        return {
            "worker_id": self.worker_id,
            **self._counts,
            "errors": list(self._errors),
            "live_slots": live_slots,
            "live_episodes": len(self._episodes),
        }
