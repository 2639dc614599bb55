"""`ray job stop` sends the driver one SIGTERM: it must stop the training loop wherever the loop happens to be,
even inside code that catches exceptions (the rollout supervisors, best-effort reports), so that cleanup runs and
deletes the Serve apps before Ray kills the driver. A real signal to this process, a real event loop."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from actors.job import TrainJob
from actors.job_stop import JobStopped, raise_stopped


@pytest.fixture
def job_signals():
    previous = {s: signal.signal(s, raise_stopped) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, handler in previous.items():
        signal.signal(s, handler)


def _job_whose_loop_swallows_exceptions(signum: int) -> TrainJob:
    job = object.__new__(TrainJob)  # only the event-loop part of the job is under test

    async def busy() -> None:
        loop = asyncio.get_running_loop()
        main = asyncio.current_task()
        loop.call_later(0.2, os.kill, os.getpid(), signum)
        loop.call_later(30, main.cancel)  # a stop that never arrives ends as a plain cancellation, not a hang
        while True:
            try:
                await asyncio.sleep(0)
                sum(range(2000))  # coroutine code running when the signal lands
            except Exception:
                pass

    job._run = busy
    return job


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_loop_even_where_its_code_catches_exceptions(job_signals, signum):
    job = _job_whose_loop_swallows_exceptions(signum)
    with pytest.raises(JobStopped, match=signal.Signals(signum).name):
        job.run()


def test_after_the_loop_a_signal_still_stops_the_job(job_signals):
    """Cleanup and the summary run after the loop: asyncio restores the default handlers when it lets go of
    a signal, which would kill the driver outright on SIGTERM."""
    job = _job_whose_loop_swallows_exceptions(signal.SIGINT)
    with pytest.raises(JobStopped):
        job.run()
    assert signal.getsignal(signal.SIGTERM) is raise_stopped
    assert signal.getsignal(signal.SIGINT) is raise_stopped
    with pytest.raises(JobStopped):
        os.kill(os.getpid(), signal.SIGTERM)
        signal.sigtimedwait([], 0.01)  # let the handler run


def test_an_exception_handler_cannot_swallow_a_stop():
    assert not issubclass(JobStopped, Exception)
