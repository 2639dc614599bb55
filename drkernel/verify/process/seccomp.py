"""A seccomp filter that keeps a candidate's process from acting on any process but itself.

On an accelerator the judge, the reference runner and the candidate of one evaluation share a uid (CUDA IPC maps a
buffer only into a process of the exporter's uid) and the host's /proc (CUDA fails in a PID namespace). Not being
dumpable stops ptrace and /proc/<pid>/mem, but the kernel still lets a process signal, renice, reschedule, pin and
re-limit every process of its own uid: a candidate could SIGSTOP its reference runner while the judge times it (the
red team measured rewards of 2.5 that way on the H200). This filter refuses those calls (EPERM) unless they name
the calling process itself (pid 0 or its own pid; children it forks inherit the filter and may name their parent
only). pidfd_send_signal is refused outright: a /proc/<pid> folder's descriptor works as a pidfd, whose target the
filter cannot see; pidfd_open stays allowed (alone it only watches a process: every call that acts through a pidfd is
refused here or needs ptrace rights, which non-dumpable processes do not grant), so a device runtime that watches a
peer keeps working. Not yet run on a GPU: it is installed before CUDA starts in the process. Built for x86_64
only (its syscall numbers below); elsewhere nothing is installed and the layer says so. Any other architecture's
syscalls (i386 through int 0x80, x32) are refused on x86_64.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

from drkernel.verify.process.sandbox import PR_SET_NO_NEW_PRIVS, libc

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
RET_ALLOW = 0x7FFF0000
RET_EPERM = 0x00050000 | errno.EPERM
LD_W_ABS, JEQ_K, JSET_K, JA, RET_K = 0x20, 0x15, 0x45, 0x05, 0x06
NR, ARCH, ARG0, ARG1 = 0, 4, 16, 24  # offsets in struct seccomp_data (args are 64-bit; pids are the low half)

# x86_64 syscalls whose first argument is the pid they act on.
ON_PID_ARG0 = {
    "kill": 62,
    "tkill": 200,
    "tgkill": 234,
    "rt_sigqueueinfo": 129,
    "rt_tgsigqueueinfo": 297,
    "prlimit64": 302,
    "sched_setparam": 142,
    "sched_setscheduler": 144,
    "sched_setaffinity": 203,
    "sched_setattr": 314,
    "migrate_pages": 256,
    "move_pages": 279,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
}
ON_PID_ARG1 = {"setpriority": (141, 0), "ioprio_set": (251, 1)}  # (nr, the `which` that names one process)
REFUSED = {"ptrace": 101, "pidfd_send_signal": 424, "pidfd_getfd": 438}


def _program(self_pid: int) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions; jumps are resolved from labels."""
    prog: list[tuple] = []

    def jump_to(label: str) -> None:
        prog.append(("ja", label))

    prog += [(LD_W_ABS, 0, 0, ARCH), (JEQ_K, 1, 0, AUDIT_ARCH_X86_64), (RET_K, 0, 0, RET_EPERM)]
    prog += [(LD_W_ABS, 0, 0, NR), (JSET_K, 0, 1, X32_SYSCALL_BIT), (RET_K, 0, 0, RET_EPERM)]
    for nr in ON_PID_ARG0.values():
        prog.append((JEQ_K, 0, 1, nr))
        jump_to("arg0")
    for nr, which in ON_PID_ARG1.values():
        prog.append((JEQ_K, 0, 1, nr))
        jump_to(f"which{which}")
    for nr in REFUSED.values():
        prog.append((JEQ_K, 0, 1, nr))
        prog.append((RET_K, 0, 0, RET_EPERM))
    prog.append((RET_K, 0, 0, RET_ALLOW))
    labels = {}
    labels["arg0"] = len(prog)
    prog += [(LD_W_ABS, 0, 0, ARG0), (JEQ_K, 2, 0, 0), (JEQ_K, 1, 0, self_pid), (RET_K, 0, 0, RET_EPERM)]
    prog.append((RET_K, 0, 0, RET_ALLOW))
    for which in sorted({w for _, w in ON_PID_ARG1.values()}):
        labels[f"which{which}"] = len(prog)
        prog += [(LD_W_ABS, 0, 0, ARG0), (JEQ_K, 1, 0, which), (RET_K, 0, 0, RET_EPERM)]
        prog += [(LD_W_ABS, 0, 0, ARG1), (JEQ_K, 2, 0, 0), (JEQ_K, 1, 0, self_pid), (RET_K, 0, 0, RET_EPERM)]
        prog.append((RET_K, 0, 0, RET_ALLOW))
    return [
        (JA, 0, 0, labels[ins[1]] - (i + 1)) if ins[0] == "ja" else ins  # type: ignore[misc]
        for i, ins in enumerate(prog)
    ]


_STATUS: list[str] = []  # this process's filter status, once installed (a spare's prepare runs twice)


def confine_to_self() -> str:
    """Install the filter on the calling process (single-threaded: call it right after the sandbox); returns the
    status for details.isolation. Irreversible; inherited by every thread and child created afterwards."""
    if not _STATUS:
        _STATUS.append(_install())
    return _STATUS[0]


def _install() -> str:
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return f"unavailable (built for Linux x86_64, this is {platform.system()} {platform.machine()})"
    prog = _program(os.getpid())
    raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    lib = libc()
    if lib.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"unavailable (no_new_privs: {os.strerror(ctypes.get_errno())})"
    if lib.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return f"unavailable (seccomp: {os.strerror(ctypes.get_errno())})"
    return "active (signals, priorities, scheduling, affinity, limits and ptrace only on itself)"
