"""The candidate's seccomp filter: calls that act on another process are refused, the process's own still work.

Each case runs in a forked child that installs the filter (as the candidate runner does after its sandbox) and
reports back; the attacks on a judge and a reference runner of the same uid are in redteam/test_redteam_issue26_s8.py.
"""

from __future__ import annotations

import multiprocessing
import os
import platform
import signal
import subprocess
import sys

import pytest

from drkernel.verify.process import seccomp

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.machine() != "x86_64", reason="the filter is built for Linux x86_64"
)


def _attempt(parent: int, conn) -> None:  # type: ignore[no-untyped-def]
    status = seccomp.confine_to_self()
    facts = {"status": status, "again": seccomp.confine_to_self()}

    def outcome(fn) -> str:  # type: ignore[no-untyped-def]
        try:
            fn()
            return "ok"
        except OSError as e:
            return e.strerror or str(e)

    facts["signal_self"] = outcome(lambda: os.kill(os.getpid(), 0))
    facts["signal_parent"] = outcome(lambda: os.kill(parent, signal.SIGCONT))
    facts["signal_everyone"] = outcome(lambda: os.kill(-1, 0))
    facts["renice_self"] = outcome(lambda: os.setpriority(os.PRIO_PROCESS, 0, 1))
    facts["renice_parent"] = outcome(lambda: os.setpriority(os.PRIO_PROCESS, parent, 1))
    facts["renice_user"] = outcome(lambda: os.setpriority(os.PRIO_USER, os.getuid(), 1))
    facts["pin_self"] = outcome(lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)))
    facts["pin_parent"] = outcome(lambda: os.sched_setaffinity(parent, os.sched_getaffinity(0)))
    pidfd = os.pidfd_open(parent)  # allowed: it only watches (a device runtime may watch its peer)
    facts["pidfd_signal_parent"] = outcome(lambda: signal.pidfd_send_signal(pidfd, signal.SIGCONT))
    run = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True, timeout=60)
    facts["subprocess"] = run.stdout.strip()
    conn.send(facts)


def test_only_the_process_itself_can_be_signalled_reniced_or_pinned():
    ctx = multiprocessing.get_context("fork")
    here, there = ctx.Pipe()
    p = ctx.Process(target=_attempt, args=(os.getpid(), there))
    p.start()
    assert here.poll(120), "the filtered child did not answer"
    facts = here.recv()
    p.join(30)
    assert facts["status"].startswith("active") and facts["again"] == facts["status"], facts
    refused = "Operation not permitted"
    assert facts["signal_parent"] == facts["signal_everyone"] == refused, facts
    assert facts["renice_parent"] == facts["renice_user"] == refused, facts
    assert facts["pin_parent"] == facts["pidfd_signal_parent"] == refused, facts
    assert facts["signal_self"] == facts["renice_self"] == facts["pin_self"] == "ok", facts
    assert facts["subprocess"] == "42"  # fork, exec and wait still work (Triton runs its assembler so)
