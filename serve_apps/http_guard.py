"""ASGI guard of the verifier ingress, run before FastAPI parses anything.

It reads the body itself, so it can bound what a slow or hostile client costs:
- size: more than `max_body_bytes` (declared or actually sent, chunked included) is a 413;
- time: a body not complete within `body_timeout_s` of the request's start is a 408 (a client that
  sends half a body and stalls does not hold the connection);
- JSON: NaN, Infinity, numbers that overflow to infinity (1e999) and lone UTF-16 surrogates are a 422
  naming the field. Python's json accepts them, but no kernel option means infinity, and neither
  survives being written to a file or echoed back in an error.
A body that is not JSON at all passes through so FastAPI reports it in its usual shape.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from typing import Any

from serve_apps.auth import header, send_json

BODY_METHODS = ("POST", "PUT", "PATCH")


def route_label(path: str, known: frozenset[str]) -> str:
    """A bounded label for counters and metric tags: the route itself if it exists, else 'other'."""
    return path if path in known else "other"


def unsafe_json_values(value: Any) -> list[dict[str, Any]]:
    """FastAPI-style error entries for every non-finite number and lone surrogate in a parsed JSON body."""
    errors: list[dict[str, Any]] = []
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ("body",))]
    while stack:
        item, loc = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if _bad_string(key):
                    errors.append({"loc": list(loc), "type": "string_unicode", "msg": "key holds a lone surrogate"})
                stack.append((child, (*loc, key if not _bad_string(key) else "<key>")))
        elif isinstance(item, list):
            stack.extend((child, (*loc, i)) for i, child in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            errors.append(
                {
                    "loc": list(loc),
                    "type": "finite_number",
                    "msg": "NaN, Infinity and out-of-range numbers are not accepted",
                }
            )
        elif isinstance(item, str) and _bad_string(item):
            errors.append(
                {
                    "loc": list(loc),
                    "type": "string_unicode",
                    "msg": "text holds a lone UTF-16 surrogate (not valid Unicode)",
                }
            )
    return sorted(errors, key=lambda e: [str(p) for p in e["loc"]])


def _bad_string(s: Any) -> bool:
    if not isinstance(s, str):
        return False
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def safe_errors(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Validation errors fit to send back: location, type and message only, never the input echoed
    (an echoed NaN or surrogate broke the error response itself and turned a 422 into a 500)."""
    return [
        {
            "loc": list(e.get("loc", ())),
            "type": str(e.get("type", "value_error")),
            "msg": str(e.get("msg", "invalid value")).encode("utf-8", "replace").decode(),
        }
        for e in errors
    ]


class BodyGuard:
    """ASGI middleware bounding the size, the read time and the JSON values of request bodies."""

    def __init__(self, app: Any, max_body_bytes: int, body_timeout_s: float) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        declared = header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._too_large(send)
            return
        deadline = time.monotonic() + self.body_timeout_s
        body = bytearray()
        more = True
        while more:
            try:
                message = await asyncio.wait_for(receive(), timeout=max(deadline - time.monotonic(), 0.001))
            except asyncio.TimeoutError:
                detail = f"request body not received within {self.body_timeout_s:g} s"
                await send_json(send, 408, json.dumps({"detail": detail}).encode(), {"Connection": "close"})
                return
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_body_bytes:
                await self._too_large(send)
                return
        errors = _check_json(bytes(body))
        if errors:
            await send_json(send, 422, json.dumps({"detail": errors}).encode())
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)

    async def _too_large(self, send: Any) -> None:
        detail = f"request body larger than the limit of {self.max_body_bytes} bytes"
        await send_json(send, 413, json.dumps({"detail": detail}).encode(), {"Connection": "close"})


def _check_json(body: bytes) -> list[dict[str, Any]]:
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):  # not JSON (or absurdly deep): FastAPI answers it
        return []
    return unsafe_json_values(parsed)
