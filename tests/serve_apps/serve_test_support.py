"""Helpers of the verifier Serve tests: candidate files, request bodies, the client retry policy."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import httpx

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[2]

# Small and quick: each evaluation stays well under a second on one CPU core.
FAST_OPTIONS = {"num_correct_trials": 2, "num_perf_trials": 3, "num_warmup": 1, "timeout_s": 60}


def code(name: str) -> str:
    return (DATA / f"{name}.py").read_text()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request_body(candidate: str, variant: int | None = None, **options) -> dict:
    """A /verify body for a data/ candidate; `variant` adds a comment so the content hash differs."""
    kernel = code(candidate) + ("" if variant is None else f"\n# variant {variant}\n")
    return {"reference_code": code("reference_add"), "kernel_code": kernel, "options": {**FAST_OPTIONS, **options}}


async def post_with_retries(
    client: httpx.AsyncClient, path: str, body: dict, attempts: int = 30, max_backoff_s: float = 2.0
) -> tuple[httpx.Response, int]:
    """The documented client policy: on 503 wait Retry-After, on a dropped connection back off; retry.

    Returns the final response and how many retries it took.
    """
    backoff = 0.1
    for attempt in range(attempts):
        try:
            response = await client.post(path, json=body)
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError):
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, max_backoff_s)
            continue
        if response.status_code != 503:
            return response, attempt
        await asyncio.sleep(min(float(response.headers.get("retry-after", backoff)), max_backoff_s))
    raise AssertionError(f"{path}: no answer after {attempts} attempts")
