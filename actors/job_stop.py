"""How a training job stops: the three reasons (a signal, a stall, work the cluster never schedules) and the
loop runner that turns SIGTERM/SIGINT/STOP_SIGNAL into one of them wherever the loop happens to be."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from actors.scheduling_watch import STOP_SIGNAL


class JobStopped(BaseException):
    """SIGTERM (ray job stop) or SIGINT: the job stops at once and cleans up. Not an Exception, so that no
    `except Exception` on the way (a retry, a best-effort report) can swallow it and keep the job running."""


class JobStalled(RuntimeError):
    """No batch for trainer.stall_limit_s, or a group met infrastructure faults past its limit: the reason says
    which counts stopped moving."""


class JobUnschedulable(JobStopped):
    """Work of the job waited trainer.schedule_limit_s for resources the cluster never freed (SchedulingWatch)."""


def raise_stopped(signum: int, _frame: Any) -> None:
    """The driver's handler for SIGTERM/SIGINT outside the loop (setup, cleanup)."""
    raise JobStopped(f"signal {signal.Signals(signum).name}")


async def run_until_stopped(loop_body: Callable[[], Awaitable[None]], unschedulable: Callable[[], str]) -> None:
    """`loop_body()`, with SIGTERM/SIGINT/STOP_SIGNAL cancelling it at its next await. A signal handler that raises
    would land in whatever coroutine or callback happens to run, where asyncio (or an `except Exception`) can
    swallow it and leave the job running until `ray job stop` kills it before cleanup. `unschedulable()` says
    what waited for resources when STOP_SIGNAL came."""
    loop, main = asyncio.get_running_loop(), asyncio.current_task()
    assert main is not None
    received: list[int] = []
    signals = (signal.SIGTERM, signal.SIGINT, STOP_SIGNAL)
    previous = {s: signal.getsignal(s) for s in signals}

    def stop(signum: int) -> None:
        received.append(signum)
        main.cancel()

    for s in signals:
        loop.add_signal_handler(s, stop, s)
    try:
        await loop_body()
    except asyncio.CancelledError:
        if not received:
            raise
        if received[0] == STOP_SIGNAL:
            raise JobUnschedulable(unschedulable()) from None
        raise JobStopped(f"signal {signal.Signals(received[0]).name}") from None
    finally:
        for s, handler in previous.items():  # asyncio restores the default; cleanup still needs the caller's
            loop.remove_signal_handler(s)
            signal.signal(s, handler)
