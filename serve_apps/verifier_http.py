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
import hmac
import math
import os
import time
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse
from ray import serve
from ray.exceptions import RayActorError
from ray.serve.exceptions import BackPressureError
from ray.serve.handle import DeploymentHandle

from drkernel.rl.rewards import score
from drkernel.verify.result import ErrorInfo, VerifyResult
from serve_apps.verifier_config import VerifierServeConfig
from serve_apps.verifier_metrics import VerifierMetrics
from serve_apps.verifier_schemas import BatchRequest, BatchResponse, Health, Stats, VerifyRequest
from serve_apps.verifier_stats import VerifierStats

INGRESS_NAME = "VerifierIngress"
OPEN_PATHS = frozenset({"/healthz"})


class _Refused(Exception):
    """A request the ingress answers with an error status instead of a result."""

    def __init__(self, status: int, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s


def _json_error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": message}, status_code=status, headers=headers)


class GuardMiddleware:
    """ASGI layer run before any body parsing: bearer token (401) and body size (413)."""

    def __init__(self, app: Any, token: str | None, max_body_bytes: int) -> None:
        self.app = app
        self.token = token
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if self.token is not None and scope["path"] not in OPEN_PATHS:
            scheme, _, given = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip(), self.token):
                await _json_error(401, "missing or wrong bearer token (Authorization: Bearer <token>)",
                                  {"WWW-Authenticate": "Bearer"})(scope, receive, send)
                return
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._too_large(scope, receive, send)
            return
        if scope["method"] in ("POST", "PUT", "PATCH"):
            body = bytearray()
            more = True
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > self.max_body_bytes:
                    await self._too_large(scope, receive, send)
                    return
            replayed = False

            async def replay() -> dict:
                nonlocal replayed
                if replayed:
                    return await receive()
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}

            await self.app(scope, replay, send)
            return
        await self.app(scope, receive, send)

    async def _too_large(self, scope: dict, receive: Any, send: Any) -> None:
        message = f"request body larger than the limit of {self.max_body_bytes} bytes"
        await _json_error(413, message)(scope, receive, send)


@serve.deployment(name=INGRESS_NAME)
@serve.ingress()
class VerifierIngress:
    """Validates, admits and fans requests out to the verifier replicas; keeps /stats."""

    def __init__(self, verifier: DeploymentHandle, config: dict[str, Any]) -> None:
        self.config = VerifierServeConfig.model_validate(config)
        self._verifier = verifier
        self._stats = VerifierStats()
        self._metrics = VerifierMetrics()
        self._token = os.environ.get(self.config.api_token_env) or None

    def __serve_build_asgi_app__(self) -> Any:
        app = FastAPI(
            title="drkernel verifier",
            description="Verify candidate Triton kernels against PyTorch references. Executes untrusted code.",
            version="0.1.0",
            docs_url=None,
            redoc_url=None,
        )

        app.add_middleware(GuardMiddleware, token=self._token, max_body_bytes=self.config.max_body_bytes)

        @app.middleware("http")  # added last, so outermost: it also sees the guard's 401/413
        async def count(request: Any, call_next: Any) -> Any:
            self._stats.requests[request.url.path] += 1
            self._metrics.requests.inc(tags={"route": request.url.path})
            response = await call_next(request)
            self._stats.responses[response.status_code] += 1
            if response.status_code >= 400:
                self._metrics.rejected.inc(tags={"code": str(response.status_code)})
            return response

        @app.exception_handler(_Refused)
        async def refused(_: Any, exc: _Refused) -> JSONResponse:
            headers = None if exc.retry_after_s is None else {"Retry-After": str(math.ceil(exc.retry_after_s))}
            return _json_error(exc.status, str(exc), headers)

        @app.get("/healthz", response_model=Health)
        async def healthz() -> Health:
            return Health(status="ok", device=self.config.device, queue_depth=self._stats.queue_depth)

        @app.get("/stats", response_model=Stats)
        async def stats() -> dict:
            return self._stats.snapshot(self.config.queue_limit)

        @app.post("/verify", response_model=VerifyResult)
        async def verify(request: VerifyRequest) -> VerifyResult:
            """One evaluation; the body of `drkernel verify --json` comes back."""
            self._check_limits([request], ("body",))
            async with _Admission(self, 1):
                return await self._evaluate(request, in_batch=False)

        @app.post("/verify/batch", response_model=BatchResponse)
        async def verify_batch(batch: BatchRequest) -> BatchResponse:
            """Several evaluations at once, spread over the replicas; results in request order."""
            if len(batch.items) > self.config.max_batch:
                raise HTTPException(422, [{"loc": ["body", "items"], "type": "too_long",
                                           "msg": f"{len(batch.items)} items; at most {self.config.max_batch}"}])
            self._check_limits(batch.items, ("body", "items"))
            async with _Admission(self, len(batch.items)):
                results = await asyncio.gather(*(self._evaluate(item, in_batch=True) for item in batch.items))
            return BatchResponse(results=list(results))

        return app

    def _check_limits(self, items: list[VerifyRequest], loc: tuple) -> None:
        """422 naming the field for limits that come from the config rather than the schema."""
        errors = []
        for i, item in enumerate(items):
            where = loc + ((i,) if len(loc) > 1 else ())
            for field in ("reference_code", "kernel_code"):
                if len(getattr(item, field)) > self.config.max_code_chars:
                    errors.append({"loc": [*where, field], "type": "string_too_long",
                                   "msg": f"longer than {self.config.max_code_chars} characters"})
            if item.options.device not in ("auto", self.config.device):
                errors.append({"loc": [*where, "options", "device"], "type": "literal_error",
                               "msg": f"this verifier runs on {self.config.device!r}; use 'auto' or that"})
        if errors:
            raise HTTPException(422, errors)

    async def _evaluate(self, request: VerifyRequest, in_batch: bool) -> VerifyResult:
        """Send one request to a replica; re-send if it died, bounded by the deadline.

        A single request reports trouble as a status code (503/504) the client can act on; a batch
        item waits out back-pressure and, failing that, becomes an infra_error result in its place,
        so the rest of the batch is not lost.
        """
        start = time.monotonic()
        deadline = start + self.config.deadline_s
        deaths = 0
        while True:
            remaining = deadline - time.monotonic()
            response = self._verifier.verify_traced.remote(
                request.reference_code, request.kernel_code, request.resolved_options()
            )
            try:
                result, hit = await asyncio.wait_for(_await(response), timeout=max(remaining, 0.001))
                break
            except asyncio.TimeoutError:
                response.cancel()
                message = f"no result within the deadline of {self.config.deadline_s} s"
                if not in_batch:
                    raise _Refused(504, message) from None
                result, hit = _infra_result(message, self.config.device), False
                break
            except RayActorError as e:
                deaths += 1
                self._stats.replica_retries += 1
                if deaths > self.config.replica_retries:
                    message = f"verifier replica died {deaths} times for this request: {type(e).__name__}"
                    if not in_batch:
                        raise _Refused(503, message, self.config.retry_after_s) from None
                    result, hit = _infra_result(message, self.config.device), False
                    break
                await asyncio.sleep(min(0.2 * deaths, max(deadline - time.monotonic(), 0)))
            except BackPressureError as e:
                retry_after = e.retry_after_s if e.retry_after_s is not None else self.config.retry_after_s
                if not in_batch:
                    raise _Refused(503, str(e), retry_after) from None
                await asyncio.sleep(min(max(retry_after, 0.1), max(deadline - time.monotonic(), 0)))
        result = score(result, request.reward)
        latency = time.monotonic() - start
        self._stats.record(result, hit, latency)
        self._metrics.latency.observe(latency)  # verdicts and cache hits are counted by the replicas
        return result


class _Admission:
    """Holds `n` slots of the ingress queue for the life of a request, or refuses with 503."""

    def __init__(self, ingress: "VerifierIngress", n: int) -> None:
        self._ingress = ingress
        self._n = n

    async def __aenter__(self) -> None:
        stats, cfg = self._ingress._stats, self._ingress.config
        if stats.queue_depth + self._n > cfg.queue_limit:
            raise _Refused(
                503, f"verifier queue full ({stats.queue_depth}/{cfg.queue_limit} evaluations); retry later",
                cfg.retry_after_s,
            )
        stats.enter_queue(self._n)
        self._ingress._metrics.queue_depth.set(self._ingress._stats.queue_depth)

    async def __aexit__(self, *_: object) -> None:
        self._ingress._stats.leave_queue(self._n)
        self._ingress._metrics.queue_depth.set(self._ingress._stats.queue_depth)


async def _await(response: Any) -> Any:
    return await response


def _infra_result(message: str, device: str) -> VerifyResult:
    """A batch item the ingress could not get a verdict for: masked by the trainer, never a reward."""
    return VerifyResult(status="infra_error", device=device, error=ErrorInfo(kind="infra", message=message))
