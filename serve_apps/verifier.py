"""The verifier deployment: one replica owns one device and runs the verifier core on it.

Several candidates compile and run their correctness checks at once (the core's
`max_concurrency`); the core serialises timing per device so measurements never overlap.
Evaluations run in a thread pool, never on the replica's event loop, so health checks and cache
hits stay instant while candidates run. Results are cached per replica by content hash
(serve_apps/result_cache.py).

Task affinity (issue 38): an RL step verifies each task's group at once (every sample, then their later turns, all
with one reference). Callers send a task's calls with Serve's `multiplexed_model_id` set to the task's id (its
reference's `source_uuid`; `routed`), and the replica registers the id as a multiplexed "model", so Serve's router
sends the task's later calls to the replica that already holds it (new tasks go to the replica holding the fewest),
falling back to any replica when that one stays full. The group's identical samples then meet one cache.

Slots: an evaluation waits on the replica's event loop for one of `max_concurrency` slots and only
then enters the core, so its clock (the core's `timeout_s`) runs only while it holds a slot. When
its last waiter goes (client disconnect, ingress deadline, a cancelled handle call) a queued
evaluation is dropped before it starts; one already in the core cannot be stopped yet (the core has
no cancellation API), so it keeps its slot until its children end and is counted as `orphaned` in
`stats()` and the queue-depth gauge meanwhile: abandoned work can never run beyond the slot bound.

In-cluster callers (rollout workers) use the handle API and get the typed `VerifyResult`, unpriced (the
episode prices it; `drkernel verify --json` and the HTTP front show it with its reward):

    handle = verifier_handle()                      # app "verifier" started by build_app
    result = await handle.verify.remote(reference, candidate, VerifyOptions(num_perf_trials=10))
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ray import serve
from ray.serve.handle import DeploymentHandle

from drkernel.config.serve import VerifierServeConfig
from drkernel.config.verifier import VerifyOptions
from drkernel.types.task_row import source_uuid
from drkernel.types.verify_result import VerifyResult
from drkernel.verify.engine import Verifier
from serve_apps.result_cache import ResultCache, content_key
from serve_apps.verifier_metrics import VerifierMetrics

APP_NAME = "verifier"
DEPLOYMENT_NAME = "Verifier"

TASKS_PER_REPLICA = 64  # task digests a replica keeps routed to it (Serve forgets the least recently used)

logger = logging.getLogger("ray.serve")


def verifier_handle(app_name: str = APP_NAME) -> DeploymentHandle:
    """Handle to the running verifier deployment, for callers inside the Ray cluster."""
    return serve.get_deployment_handle(DEPLOYMENT_NAME, app_name=app_name)


def routed(handle: Any, reference: str) -> Any:
    """`handle` with the task's calls routed to the replica that holds the task (see the module docstring). Any other
    handle (an actor standing in for the deployment, as in the rollout tests) has no router to steer: as it is."""
    if not isinstance(handle, DeploymentHandle):
        return handle
    return handle.options(multiplexed_model_id=source_uuid(reference))  # the task's id, from its reference


async def verify_task(
    handle: Any, reference: str, candidate: str, entry_point: str, options: VerifyOptions
) -> VerifyResult:
    """One episode's evaluation through the deployment (rollout workers, validation, `drkernel eval`): the caller's
    options for the task's entry point, routed to the replica that holds the task; the verdict unpriced."""
    task_options = options.model_copy(update={"entry_point": entry_point})
    return await routed(handle, reference).verify.remote(reference, candidate, task_options)


def resolve_options(options: VerifyOptions | dict[str, Any] | None, device: str) -> VerifyOptions:
    """The options a replica of `device` runs: `auto` becomes its device; another device is an error."""
    opts = options if isinstance(options, VerifyOptions) else VerifyOptions.model_validate(options or {})
    refusal = opts.device_refusal(device)
    if refusal:
        raise ValueError(refusal)
    return opts.model_copy(update={"device": device})


@serve.deployment(name=DEPLOYMENT_NAME)
class VerifierReplica:
    """One device, one verifier core, one bounded result cache."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = VerifierServeConfig.model_validate(config)
        self._core = Verifier(
            device=self.config.device, max_concurrency=self.config.max_concurrency, spares=self.config.spares
        )
        self._pool = ThreadPoolExecutor(max_workers=self.config.max_concurrency, thread_name_prefix="verify")
        self._cache = ResultCache(self.config.cache_size)
        self._metrics = VerifierMetrics()
        self._slots: asyncio.Semaphore | None = None  # made on the replica's event loop, at first use
        self._in_flight = 0  # requests being answered (cache hits and waiters included)
        self._waiting = 0  # evaluations waiting for a slot
        self._running = 0  # evaluations in the core (orphans included)
        self._orphaned = 0  # evaluations in the core that nobody waits for any more
        self._started = 0  # evaluations that got a slot and ran in the core (cancelled waiters never do)
        self._task_calls: dict[str, int] = {}  # calls per task digest routed here, the last TASKS_PER_REPLICA tasks
        self._replica = serve.get_replica_context().replica_tag

    async def verify(
        self, reference: str, candidate: str, options: VerifyOptions | dict[str, Any] | None = None
    ) -> VerifyResult:
        """The verdict, unpriced (callers that show a reward price it with drkernel.rl.rewards.score)."""
        result, _ = await self.verify_traced(reference, candidate, options)
        return result

    async def verify_traced(
        self, reference: str, candidate: str, options: VerifyOptions | dict[str, Any] | None = None
    ) -> tuple[VerifyResult, bool]:
        """The verdict and whether it came from this replica's cache (the HTTP ingress counts those)."""
        start = time.monotonic()
        self._metrics.requests.inc(tags={"route": "handle"})
        opts = resolve_options(options, self.config.device)
        digest = serve.get_multiplexed_model_id()
        if digest:
            await self._hold_task(digest)
            self._task_calls[digest] = self._task_calls.pop(digest, 0) + 1  # most recent last
            if len(self._task_calls) > TASKS_PER_REPLICA:
                del self._task_calls[next(iter(self._task_calls))]
        self._in_flight += 1
        try:
            result, hit = await self._cache.get_or_compute(
                content_key(reference, candidate, opts), lambda: self._run(reference, candidate, opts)
            )
        finally:
            self._in_flight -= 1
        self._metrics.record(result, hit, time.monotonic() - start)
        return result, hit

    @serve.multiplexed(max_num_models_per_replica=TASKS_PER_REPLICA)
    async def _hold_task(self, digest: str) -> str:
        """Serve's model multiplexing used as task affinity: once this replica has "loaded" the digest, the router
        prefers it for the task's calls. The routing is what this gives; what the calls share is this replica."""
        return digest

    def _gauge(self) -> None:
        self._metrics.queue_depth.set(self._waiting + self._running)

    async def _run(self, reference: str, candidate: str, options: VerifyOptions) -> VerifyResult:
        """One evaluation in the core, holding a slot from the moment it starts until its children end."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.config.max_concurrency)
        self._waiting += 1
        self._gauge()
        try:
            await self._slots.acquire()  # cancelled here: it never started, nothing to clean up
        finally:
            self._waiting -= 1
        self._running += 1
        self._started += 1
        self._gauge()
        work = asyncio.get_running_loop().run_in_executor(self._pool, self._judged, reference, candidate, options)
        work.add_done_callback(self._release)
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            self._orphaned += 1
            work.add_done_callback(self._orphan_done)
            raise
        except Exception as e:  # the core reports candidate faults itself; this is the verifier failing
            logger.exception("verifier core raised")
            return VerifyResult.infra("infra", f"verifier core raised {type(e).__name__}: {e}", self.config.device)

    def _judged(self, reference: str, candidate: str, options: VerifyOptions) -> VerifyResult:
        result = self._core.verify(reference, candidate, options)
        result.details["replica"] = self._replica  # which replica judged it (task affinity, operators)
        return result

    def _release(self, _: object) -> None:
        self._running -= 1
        self._slots.release()
        self._gauge()

    def _orphan_done(self, _: object) -> None:
        self._orphaned -= 1

    def stats(self) -> dict[str, Any]:
        """This replica's cache and load, for operators and tests."""
        return {
            "replica": self._replica,
            "cache_entries": len(self._cache),
            "cache_hits": self._cache.hits,
            "cache_misses": self._cache.misses,
            "in_flight": self._in_flight,
            "waiting": self._waiting,
            "running": self._running,
            "orphaned": self._orphaned,
            "started": self._started,
            "slots": self.config.max_concurrency,
            "task_calls": dict(self._task_calls),
        }

    def __del__(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._core.close()
