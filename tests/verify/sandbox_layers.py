"""Which sandbox layers this host can give an evaluation child, probed independently of the sandbox.

A sandbox test needs its layers: where the host truly cannot provide one (no CAP_SYS_ADMIN for namespaces,
not root, a user namespace without the evaluation uids) the test skips and names the layer; where the host
can, the sandbox must report the layer active, and anything else is a failure, not a skip. The probe runs in
a throwaway subprocess, so unshare and setresuid never touch the test process."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from typing import Any

import pytest

from drkernel.verify.process.sandbox import CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, UID_BASE

_PROBE = f"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
missing = {{}}
def attempt(name, flags):
    if not sys.platform.startswith("linux"):
        missing[name] = "not Linux"
        return
    pid = os.fork()
    if pid == 0:
        os._exit(0 if libc.unshare(flags) == 0 else ctypes.get_errno())
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if status:
        missing[name] = "unshare: " + os.strerror(status)
attempt("namespaces", {CLONE_NEWNS | CLONE_NEWNET})
attempt("pid_namespace", {CLONE_NEWPID})
if os.geteuid() != 0:
    missing["uid"] = missing["nproc_limit"] = f"not root: runs as uid {{os.geteuid()}}"
else:
    pid = os.fork()
    if pid == 0:
        try:
            uid = {UID_BASE} + os.getpid()
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        except OSError as e:
            os._exit(e.errno or 1)
        os._exit(0)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if status:
        # RLIMIT_NPROC is enforced per uid and root is exempt: without the uid there is no process limit
        missing["uid"] = missing["nproc_limit"] = "setresuid to an evaluation uid: " + os.strerror(status)
print(json.dumps(missing))
"""


@functools.cache
def host_missing() -> dict[str, str]:
    """Layer name -> why this host cannot provide it (layers it can provide are absent)."""
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def skip_unless_host_has(*names: str) -> None:
    """Skip, naming the layer, when this host cannot provide one of `names`."""
    for name in names:
        if name in host_missing():
            pytest.skip(f"sandbox layer {name} is unavailable on this host ({host_missing()[name]})")


def require_layers(layers: dict[str, Any], *names: str) -> None:
    """Every layer in `names` is active in `layers` (an evaluation's details.isolation); skip naming a layer
    the host cannot provide, fail on one it can that the sandbox did not apply."""
    skip_unless_host_has(*names)
    for name in names:
        status = str(layers.get(name, "not reported"))
        assert status.startswith("active"), (
            f"sandbox layer {name} is available on this host but the sandbox reports {status!r}: {layers!r}"
        )
