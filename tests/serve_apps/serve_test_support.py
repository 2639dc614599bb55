"""Helpers of the verifier Serve tests: candidate files, request bodies, the client retry policy."""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
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
    client: httpx.AsyncClient, path: str, body: dict, give_up_s: float = 600, max_backoff_s: float = 2.0
) -> tuple[httpx.Response, int]:
    """The documented client policy: on 503 wait Retry-After, on a dropped connection back off; retry.

    Gives up after a time, not a number of attempts: a loaded box answers 503 for longer, not differently.
    Returns the final response and how many retries it took.
    """
    backoff = 0.1
    give_up = time.monotonic() + give_up_s
    for retries in itertools.count():
        if retries and time.monotonic() >= give_up:
            raise AssertionError(f"{path}: no answer after {retries} attempts in {give_up_s:.0f} s")
        try:
            response = await client.post(path, json=body)
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError):
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, max_backoff_s)
            continue
        if response.status_code != 503:
            return response, retries
        await asyncio.sleep(min(float(response.headers.get("retry-after", backoff)), max_backoff_s))
