"""Bearer-token authentication for any Serve HTTP route: the verifier, the policy's OpenAI-compatible route.

Usage as ASGI middleware (FastAPI/Starlette):

    tokens = tokens_from_env("DRKERNEL_API_TOKEN")            # None: auth off
    app.add_middleware(BearerAuth, tokens=tokens, open_paths={"/healthz"})

or as a plain check inside your own middleware: `client_of(authorization_header, tokens)`.

Tokens are compared as bytes in constant time: a header with non-ASCII bytes is simply wrong, never an
error (`hmac.compare_digest` raises TypeError on non-ASCII str). Several tokens may be configured
(comma-separated in the env var), one per client; which one matched names the client for fair shares.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterable
from typing import Any

UNAUTHORIZED_MESSAGE = "missing or wrong bearer token (Authorization: Bearer <token>)"


def tokens_from_env(var: str) -> tuple[str, ...] | None:
    """The accepted tokens in env var `var` (comma-separated); None when unset or empty (auth off)."""
    tokens = tuple(t.strip() for t in os.environ.get(var, "").split(",") if t.strip())
    return tokens or None


def client_of(authorization: bytes | str | None, tokens: Iterable[str]) -> int | None:
    """Index of the token an `Authorization: Bearer <token>` header carries, or None when it carries none.

    Every configured token is compared, so the time taken does not reveal which one nearly matched.
    """
    if authorization is None:
        return None
    raw = authorization if isinstance(authorization, bytes) else authorization.encode("utf-8", "surrogateescape")
    scheme, _, given = raw.strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return None
    given = given.strip()
    match = None
    for i, token in enumerate(tokens):
        if hmac.compare_digest(given, token.encode("utf-8")) and match is None:
            match = i
    return match


def header(scope: dict[str, Any], name: bytes) -> bytes | None:
    """The first value of header `name` (lower-case bytes) in an ASGI scope."""
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value
    return None


async def send_json(send: Any, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    """A complete JSON response on a raw ASGI `send` (no framework needed)."""
    extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BearerAuth:
    """ASGI middleware: 401 unless the request carries one of `tokens`; `open_paths` need none.

    The matching token's index is put in `scope["state"]["client"]` (f"token{i}") so later layers can
    key per-client limits on it. With `tokens=None` every request passes and nothing is set.
    """

    def __init__(self, app: Any, tokens: Iterable[str] | None, open_paths: Iterable[str] = ()) -> None:
        self.app = app
        self.tokens = tuple(tokens) if tokens else None
        self.open_paths = frozenset(open_paths)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.tokens is None or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        index = client_of(header(scope, b"authorization"), self.tokens)
        if index is None:
            body = b'{"detail": "' + UNAUTHORIZED_MESSAGE.encode() + b'"}'
            await send_json(send, 401, body, {"WWW-Authenticate": "Bearer"})
            return
        scope.setdefault("state", {})["client"] = f"token{index}"
        await self.app(scope, receive, send)
