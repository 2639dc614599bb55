"""HTTP ingress of the verifier: schemas, auth, size and queue limits in front of the device replicas.

Routes: POST /verify, POST /verify/batch, GET /healthz, GET /stats, GET /openapi.json.
The ingress never does device work and never blocks its event loop; it admits at most
`queue_limit` evaluations at once and answers 503 with Retry-After beyond that, so a client
never waits on an unbounded queue. A request whose replica dies is re-sent to a live replica
(evaluations are pure functions of their inputs), and every request has a deadline (504).
The endpoint executes untrusted code: keep it on 127.0.0.1 or behind a bearer token.

No `from __future__ import annotations` here: Serve ships the ingress class by value, and FastAPI
must resolve the route annotations in the replica, so they have to be real objects.
"""

import asyncio
import math
import time
from collections import Counter
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from ray import serve
from ray.exceptions import RayActorError
from ray.serve.exceptions import BackPressureError
from ray.serve.handle import DeploymentHandle

from drkernel.config.serve import VerifierServeConfig
from drkernel.types.verify_result import ErrorInfo, VerifyResult
from drkernel.verify.static.reference_source import one_line, reference_problem
from serve_apps.auth import BearerAuth, tokens_from_env
from serve_apps.http_guard import BodyGuard, route_label, safe_errors
from serve_apps.verifier import routed
from serve_apps.verifier_metrics import VerifierMetrics
from serve_apps.verifier_schemas import BatchRequest, BatchResponse, Health, Stats, VerifyRequest, VerifyResponse
from serve_apps.verifier_stats import VerifierStats

INGRESS_NAME = "VerifierIngress"
OPEN_PATHS = frozenset({"/healthz"})
ROUTES = frozenset({"/verify", "/verify/batch", "/healthz", "/stats", "/openapi.json"})
REPLICA_STATS_TIMEOUT_S = 1.0


class _Refused(Exception):
    """A request the ingress answers with an error status instead of a result."""

    def __init__(self, status: int, message: Any, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.detail = message
        self.retry_after_s = retry_after_s


def _json_error(status: int, detail: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


@serve.deployment(name=INGRESS_NAME)
@serve.ingress()
class VerifierIngress:
    """Validates, admits and fans requests out to the verifier replicas; keeps /stats.

    Fairness: a client is its bearer token (several may be configured), else its peer address. One
    client may hold at most `client_admission_limit` admitted evaluations (503 beyond) and have at most
    `client_dispatch_limit` of them at the replicas at once; the rest wait here, counted in the queue
    depth. All HTTP work together takes at most `dispatch_limit` replica request slots, leaving the
    others to handle callers (the trainer). So one big batch cannot fill the replicas' queues and
    starve everyone else.
    """

    def __init__(self, verifier: DeploymentHandle, config: dict[str, Any]) -> None:
        self.config = VerifierServeConfig.model_validate(config)
        self._verifier = verifier
        self._stats = VerifierStats(metrics=VerifierMetrics())
        self._tokens = tokens_from_env(self.config.api_token_env)
        self._admitted: Counter[str] = Counter()
        self._client_slots: dict[str, asyncio.Semaphore] = {}
        self._dispatch: asyncio.Semaphore | None = None  # made on the serving event loop
        self._dispatched = 0

    def __serve_build_asgi_app__(self) -> Any:
        app = FastAPI(
            title="drkernel verifier",
            description="Verify candidate Triton kernels against PyTorch references. Executes untrusted code.",
            version="0.1.0",
            docs_url=None,
            redoc_url=None,
        )
        # added first = innermost: auth, then the body guard, run before FastAPI parses anything
        app.add_middleware(
            BodyGuard, max_body_bytes=self.config.max_body_bytes, body_timeout_s=self.config.body_timeout_s
        )
        app.add_middleware(BearerAuth, tokens=self._tokens, open_paths=OPEN_PATHS)

        @app.middleware("http")  # added last, so outermost: it also sees the guard's 401/408/413/422
        async def count(request: Any, call_next: Any) -> Any:
            route = route_label(request.url.path, ROUTES)  # bounded: made-up paths are all "other"
            self._stats.request(route)
            response = await call_next(request)
            self._stats.response(response.status_code)
            return response

        @app.exception_handler(RequestValidationError)
        async def invalid(_: Any, exc: RequestValidationError) -> JSONResponse:
            return _json_error(422, safe_errors(exc.errors()))

        @app.exception_handler(_Refused)
        async def refused(_: Any, exc: _Refused) -> JSONResponse:
            headers = None if exc.retry_after_s is None else {"Retry-After": str(math.ceil(exc.retry_after_s))}
            return _json_error(exc.status, exc.detail, headers)

        @app.get("/healthz", response_model=Health)
        async def healthz() -> Health:
            return Health(status="ok", device=self.config.device, queue_depth=self._stats.queue_depth)

        @app.get("/stats", response_model=Stats)
        async def stats() -> dict:
            return {
                **self._stats.snapshot(self.config.queue_limit),
                "dispatched": self._dispatched,
                "clients": len(self._admitted),
                "replica": await self._replica_stats(),
            }

        @app.post("/verify", response_model=VerifyResponse)
        async def verify(body: VerifyRequest, request: Request) -> VerifyResponse:
            """One evaluation priced by the request's reward config: the body of `drkernel verify --json`."""
            self._check_limits([body], ("body",))
            async with _QueueShare(self, _client(request), 1) as client:
                result = await self._evaluate(body, client, in_batch=False)
            if result.status == "infra_error" and result.error is not None and result.error.kind == "reference":
                raise _Refused(
                    422, [{"loc": ["body", "reference_code"], "type": "reference_failed", "msg": result.error.message}]
                )
            return VerifyResponse.priced(result, body.reward)

        @app.post("/verify/batch", response_model=BatchResponse)
        async def verify_batch(batch: BatchRequest, request: Request) -> BatchResponse:
            """Several evaluations at once, spread over the replicas; results in request order."""
            if len(batch.items) > self.config.max_batch:
                raise HTTPException(
                    422,
                    [
                        {
                            "loc": ["body", "items"],
                            "type": "too_long",
                            "msg": f"{len(batch.items)} items; at most {self.config.max_batch}",
                        }
                    ],
                )
            self._check_limits(batch.items, ("body", "items"))
            async with _QueueShare(self, _client(request), len(batch.items)) as client:
                results = await asyncio.gather(*(self._evaluate(item, client, in_batch=True) for item in batch.items))
            return BatchResponse(
                results=[VerifyResponse.priced(r, item.reward) for r, item in zip(results, batch.items)]
            )

        return app

    async def _replica_stats(self) -> dict | None:
        """Load of the verifier replica that answers first (exact with one replica); None when all are busy."""
        try:
            return await asyncio.wait_for(_await(self._verifier.stats.remote()), REPLICA_STATS_TIMEOUT_S)
        except Exception:  # a busy or dead replica must not break /stats
            return None

    def _check_limits(self, items: list[VerifyRequest], loc: tuple) -> None:
        """422 naming the field for limits that come from the config rather than the schema, and for a
        reference that cannot work (checked statically: no process starts for it)."""
        errors = []
        for i, item in enumerate(items):
            where = loc + ((i,) if len(loc) > 1 else ())
            for field in ("reference_code", "kernel_code"):
                if len(getattr(item, field)) > self.config.max_code_chars:
                    errors.append(
                        {
                            "loc": [*where, field],
                            "type": "string_too_long",
                            "msg": f"longer than {self.config.max_code_chars} characters",
                        }
                    )
            refusal = item.options.device_refusal(self.config.device)
            if refusal:
                errors.append({"loc": [*where, "options", "device"], "type": "literal_error", "msg": refusal})
            if not errors:
                problem = reference_problem(item.reference_code, item.entry_point)
                if problem is not None:
                    errors.append({"loc": [*where, "reference_code"], "type": "reference_invalid", "msg": problem})
        if errors:
            raise HTTPException(422, errors)

    async def _evaluate(self, request: VerifyRequest, client: str, in_batch: bool) -> VerifyResult:
        """Send one request to a replica; re-send if it died, bounded by the deadline.

        It first waits here for a dispatch slot of its client and one of all HTTP work, so the wait is
        counted in this ingress's queue and bounded by the same deadline. A single request reports
        trouble as a status code (503/504) the client can act on; a batch item waits out back-pressure
        and, failing that, becomes an infra_error result in its place, so the rest of the batch is not
        lost. Such results come from here, never from a replica's cache.
        """
        start = time.monotonic()
        deadline = start + self.config.deadline_s
        if self._dispatch is None:
            self._dispatch = asyncio.Semaphore(self.config.dispatch_limit)
        mine = self._client_slots.setdefault(client, asyncio.Semaphore(self.config.client_dispatch_limit))
        try:
            result, hit = await asyncio.wait_for(
                self._dispatched_call(request, mine, deadline, in_batch),
                timeout=max(deadline - time.monotonic(), 0.001),
            )
        except asyncio.TimeoutError:
            message = f"no result within the deadline of {self.config.deadline_s} s"
            if not in_batch:
                raise _Refused(504, message) from None
            result, hit = VerifyResult.infra("infra", message, self.config.device), False
        if result.status == "infra_error" and result.error is not None and result.error.kind == "reference":
            result = result.model_copy(
                update={"error": ErrorInfo(kind="reference", message=one_line(result.error.message)), "details": {}}
            )
        latency = time.monotonic() - start
        self._stats.record(result, hit, latency)
        return result

    async def _dispatched_call(
        self, request: VerifyRequest, mine: asyncio.Semaphore, deadline: float, in_batch: bool
    ) -> tuple[VerifyResult, bool]:
        async with mine, self._dispatch:
            self._dispatched += 1
            try:
                return await self._call_replica(request, deadline, in_batch)
            finally:
                self._dispatched -= 1

    async def _call_replica(self, request: VerifyRequest, deadline: float, in_batch: bool) -> tuple[VerifyResult, bool]:
        deaths = 0
        while True:
            response = routed(self._verifier, request.reference_code).verify_traced.remote(
                request.reference_code, request.kernel_code, request.resolved_options()
            )
            try:
                return await _await(response)
            except asyncio.CancelledError:
                response.cancel()  # the replica drops the evaluation if nobody else waits for it
                raise
            except RayActorError as e:
                deaths += 1
                self._stats.replica_retries += 1
                if deaths > self.config.replica_retries:
                    message = f"verifier replica died {deaths} times for this request: {type(e).__name__}"
                    if not in_batch:
                        raise _Refused(503, message, self.config.retry_after_s) from None
                    return VerifyResult.infra("infra", message, self.config.device), False
                await asyncio.sleep(min(0.2 * deaths, max(deadline - time.monotonic(), 0)))
            except BackPressureError as e:
                retry_after = e.retry_after_s if e.retry_after_s is not None else self.config.retry_after_s
                if not in_batch:
                    raise _Refused(503, str(e), retry_after) from None
                await asyncio.sleep(min(max(retry_after, 0.1), max(deadline - time.monotonic(), 0)))


def _client(request: Request) -> str:
    """Who a request comes from: the token it authenticated with, else its peer address."""
    state = request.scope.get("state") or {}
    if "client" in state:
        return state["client"]
    peer = request.client
    return f"peer:{peer.host}" if peer is not None else "peer:unknown"


class _QueueShare:
    """Holds `n` slots of the ingress queue, and of its client's share, for the life of a request."""

    def __init__(self, ingress: "VerifierIngress", client: str, n: int) -> None:
        self._ingress = ingress
        self._client = client
        self._n = n

    async def __aenter__(self) -> str:
        ingress = self._ingress
        stats, cfg = ingress._stats, ingress.config
        if stats.queue_depth + self._n > cfg.queue_limit:
            raise _Refused(
                503,
                f"verifier queue full ({stats.queue_depth}/{cfg.queue_limit} evaluations); retry later",
                cfg.retry_after_s,
            )
        held = ingress._admitted[self._client]
        if held + self._n > cfg.client_admission_limit:
            raise _Refused(
                503,
                f"this client already has {held} evaluations queued; its share is "
                f"{cfg.client_admission_limit}; retry later",
                cfg.retry_after_s,
            )
        ingress._admitted[self._client] += self._n
        stats.enter_queue(self._n)
        return self._client

    async def __aexit__(self, *_: object) -> None:
        ingress = self._ingress
        ingress._admitted[self._client] -= self._n
        if ingress._admitted[self._client] <= 0:
            del ingress._admitted[self._client]
            ingress._client_slots.pop(self._client, None)
        ingress._stats.leave_queue(self._n)


async def _await(response: Any) -> Any:
    return await response
