"""The rollout pool: starts N rollout workers, watches their `run` calls, replaces the ones that die.

A worker is dead when its `run()` fails with an actor error (killed, its node gone, out of memory) or with
any exception (its loop broke). Either way its admission slots are freed in the queue, its groups go back to
the head of the prompt source's line, and a fresh worker with a new id takes its place, so a late message
from the dead one can never be mistaken for the new one's. `run()` returning means the prompts ran out.

The pool is plain asyncio (no actor of its own): the training job (actors.job.TrainJob, in the driver) runs it on
its event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import ray

from actors.rollout_worker import EpisodeFn, RolloutWorker
from drkernel.config.train import RolloutConfig
from drkernel.config.verifier import VerifyOptions
from drkernel.rl.rewards import RewardConfig

log = logging.getLogger(__name__)

WorkerFactory = Callable[[str], ray.actor.ActorHandle]


def worker_factory(
    queue: ray.actor.ActorHandle,
    prompt_source: ray.actor.ActorHandle,
    policy: Any,
    verifier: Any,
    tokenizer: Any,
    cfg: RolloutConfig,
    reward_cfg: RewardConfig | None = None,
    episode_fn: EpisodeFn | None = None,
    verify_options: VerifyOptions | None = None,
    verify_delay_s: float = 0.0,
    run: str = "",
) -> WorkerFactory:
    """Start one RolloutWorker per call, with the rollout section's CPU reservation and no Ray restarts
    (the pool replaces dead workers itself, under new ids); `run` tags its dashboard series."""

    def start(worker_id: str) -> ray.actor.ActorHandle:
        return RolloutWorker.options(num_cpus=cfg.cpus_per_worker, max_restarts=0).remote(
            worker_id,
            queue,
            prompt_source,
            policy,
            verifier,
            tokenizer,
            cfg,
            reward_cfg,
            episode_fn,
            verify_options=verify_options,
            verify_delay_s=verify_delay_s,
            run=run,
        )

    return start


class RolloutPool:
    """N supervised rollout workers; `wait()` returns when all have run out of prompts."""

    def __init__(
        self,
        factory: WorkerFactory,
        num_workers: int,
        queue: ray.actor.ActorHandle,
        prompt_source: ray.actor.ActorHandle,
        max_restarts: int = 16,
        name: str = "rollout",
    ):
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        self._factory, self.num_workers = factory, num_workers
        self._queue, self._source = queue, prompt_source
        self.max_restarts, self.name = max_restarts, name
        self.workers: dict[int, tuple[str, ray.actor.ActorHandle]] = {}  # slot index -> live worker
        self.restarts = 0
        self.deaths: list[dict[str, Any]] = []  # worker id, reason, the group ids handed back
        self.results: dict[str, dict[str, Any]] = {}
        self._supervisors: list[asyncio.Task] = []
        self._stopping = False

    def start(self) -> None:
        """Start the workers and their supervisors on the running event loop."""
        if self._supervisors:
            raise RuntimeError("rollout pool already started")
        self._supervisors = [asyncio.create_task(self._supervise(i)) for i in range(self.num_workers)]

    async def _supervise(self, index: int) -> None:
        generation = 0
        while not self._stopping:
            worker_id = f"{self.name}-{index}.{generation}"
            handle = self._factory(worker_id)
            self.workers[index] = (worker_id, handle)
            try:
                self.results[worker_id] = await handle.run.remote()
                return
            except Exception as e:  # an actor error or a broken loop: replace the worker
                if self._stopping:
                    return
                reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                log.warning("rollout worker %s died (%s); replacing it", worker_id, reason)
                ray.kill(handle, no_restart=True)
                await self._queue.release_worker.remote(worker_id)
                reissued = await self._source.reissue.remote(worker_id)
                self.deaths.append({"worker_id": worker_id, "reason": reason, "reissued": reissued})
            generation += 1
            self.restarts += 1
            if self.restarts > self.max_restarts:
                raise RuntimeError(
                    f"rollout workers died {self.restarts} times (max_restarts "
                    f"{self.max_restarts}); last: {self.deaths[-1]}"
                )

    async def wait(self) -> dict[str, dict[str, Any]]:
        """Until every worker has run out of prompts; raises if workers keep dying."""
        await asyncio.gather(*self._supervisors)
        return dict(self.results)

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Stop every worker (their groups go back to the prompt source), then kill the actors.

        Also from a later event loop than the one that started the pool (cleanup after a failed run): the
        supervisors of a closed loop are already gone, and a queue or source that died with the run does not
        keep the workers alive."""
        self._stopping = True
        live = list(self.workers.values())
        stops = [handle.stop.remote() for _, handle in live]
        if stops:
            await asyncio.wait([asyncio.ensure_future(ref) for ref in stops], timeout=timeout_s)
        loop = asyncio.get_running_loop()
        mine = [task for task in self._supervisors if task.get_loop() is loop]
        for task in mine:
            task.cancel()
        await asyncio.gather(*mine, return_exceptions=True)
        for _, handle in live:
            ray.kill(handle, no_restart=True)
        self.workers.clear()
        for worker_id, _ in live:  # a worker that did not stop in time still must not keep slots or groups
            try:
                await self._queue.release_worker.remote(worker_id)
                await self._source.reissue.remote(worker_id)
            except ray.exceptions.RayActorError as e:
                log.warning("rollout worker %s: its slots and groups were not handed back (%s)", worker_id, e)

    def stats(self) -> dict[str, Any]:
        return {
            "workers": {i: wid for i, (wid, _) in self.workers.items()},
            "restarts": self.restarts,
            "deaths": list(self.deaths),
        }
