"""The sandbox layers on their own: a raw payload run in a real child right after isolate().

The gate rejects sources that fork or probe the file system, so these payloads reach the sandbox
directly, the way an evaluation child does: a fresh process that imported torch and Triton (what the
warm fork-server preloads) calls isolate() on a private dir and then runs hostile code. The child
reports over an inherited pipe, as the harness's channel does.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from sandbox_layers import require_layers, skip_unless_host_has

from drkernel.verify.process.sandbox import UID_BASE, UID_GROUP_BASE, group_uid

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
SANDBOX = "drkernel/verify/process/sandbox.py"
DRIVER = r"""
import json, os, sys
spec = json.loads(sys.argv[1])
sys.path.insert(0, spec["checkout"])
out = os.fdopen(spec["fd"], "w", buffering=1)
def report(**kw):
    out.write(json.dumps(kw) + "\n")
if spec["preload"]:
    import torch, triton, triton.language as tl  # what the warm fork-server has imported
from drkernel.verify.process.sandbox import isolate
layers = isolate(spec["workdir"], on_accelerator=spec["accelerator"], memory_limit_mb=None, nproc_limit=spec["nproc"],
                 env={"TRITON_INTERPRET": "1"}, uid=spec["uid"])
report(kind="layers", layers=layers, pid=os.getpid(), uid=os.getuid(), gid=os.getgid(), groups=os.getgroups())
exec(spec["payload"])
"""

PROBE = r"""
import errno
facts = {}
try:
    open("/tmp/drkernel_sandbox_escape.txt", "w").write("x")
    facts["write_outside"] = "written"
except OSError as e:
    facts["write_outside"] = errno.errorcode[e.errno]
try:
    os.setresuid(0, 0, 0)
    facts["regain_root"] = "yes"
except PermissionError:
    facts["regain_root"] = "refused"
import wave  # stdlib, not imported before: read from the interpreter below the mode-700 home
import drkernel.verify.static.gate  # the checkout in the mode-700 folder, first imported now
facts["checkout_module"] = drkernel.verify.static.gate.__file__
cache = os.environ["TRITON_CACHE_DIR"]
os.makedirs(cache, exist_ok=True)
facts["cache_owner"] = os.stat(cache).st_uid
facts["workdir_owner"] = os.stat(".").st_uid
facts["root_home_listing"] = sorted(os.listdir(spec["hidden_home"]))
sys.path.insert(0, os.getcwd())
import candidate  # a Triton kernel in a file of the private dir, imported after the drop like a candidate

x = torch.arange(100, dtype=torch.float32)
candidate.double[(1,)](x, 100, BLOCK=128)
facts["kernel_ok"] = bool(torch.equal(x, torch.arange(100, dtype=torch.float32) * 2))
report(kind="facts", **facts)
"""

KERNEL_FILE = """import triton
import triton.language as tl


@triton.jit
def double(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
"""

# Every process forks forever; pid 1 reports how far it got when the kernel first refuses a fork.
FORK_BOMB = r"""
import time
forks = 0
reported = False
while True:
    try:
        if os.fork() == 0:
            continue
        forks += 1
    except OSError as e:
        if os.getpid() == 1 and not reported:
            report(kind="refused", forks=forks, error=e.strerror)
            reported = True
        time.sleep(0.01)
"""


def run_driver(
    payload: str,
    workdir: str,
    checkout: Path,
    preload: bool,
    nproc: int,
    hidden_home: str = "",
    accelerator: bool = False,
    uid: int | None = None,
):
    r, w = os.pipe()
    spec = {
        "accelerator": accelerator,
        "uid": uid,
        "payload": payload,
        "workdir": workdir,
        "checkout": str(checkout),
        "fd": w,
        "preload": preload,
        "nproc": nproc,
        "hidden_home": hidden_home,
    }
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG")}
    env["TRITON_INTERPRET"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, json.dumps(spec)],
        pass_fds=(w,),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd="/",
    )
    os.close(w)
    return proc, os.fdopen(r)


def read_message(stream, proc, timeout: float) -> dict:
    if not select.select([stream], [], [], timeout)[0]:
        proc.kill()
        pytest.fail(f"no message from the sandboxed child in {timeout} s; stderr: {proc.stderr.read()[-2000:]}")
    line = stream.readline()
    if not line:
        proc.wait(10)
        pytest.fail(f"child ended early (status {proc.returncode}): {proc.stderr.read()[-3000:]}")
    return json.loads(line)


def processes_of(uid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                uids = next(line for line in f if line.startswith("Uid:")).split()[1:]
        except (OSError, StopIteration):
            continue
        if int(uids[0]) == uid:
            found.append(int(entry))
    return found


@pytest.fixture
def private_workdir():
    """Like the engine's: a mode-700 root-owned temp dir with the child's mode-700 dir inside."""
    root = tempfile.mkdtemp(prefix="drkernel-sbtest-")
    work = os.path.join(root, "candidate")
    os.mkdir(work, 0o700)
    Path(work, "candidate.py").write_text(KERNEL_FILE)
    yield work
    subprocess.run(["rm", "-rf", root], check=False)


@pytest.fixture(scope="module")
def locked_checkout():
    """A clone of this repository inside a mode-700 folder, as a checkout in root's home would be."""
    home = tempfile.mkdtemp(prefix="drkernel-home700-")
    os.chmod(home, 0o700)
    Path(home, "secret.txt").write_text("root only\n")
    clone = Path(home, "drk")
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    subprocess.run(
        ["cp", str(REPO / SANDBOX), str(clone / SANDBOX)], check=True
    )  # the working copy under test, committed or not
    yield home, clone
    subprocess.run(["rm", "-rf", home], check=False)


def test_child_runs_unprivileged_in_its_own_namespaces(private_workdir, locked_checkout):
    home, clone = locked_checkout
    proc, stream = run_driver(PROBE, private_workdir, clone, preload=True, nproc=256, hidden_home=home)
    try:
        first = read_message(stream, proc, 240)
        layers = first["layers"]
        require_layers(layers, "namespaces", "pid_namespace", "uid", "nproc_limit")
        facts = read_message(stream, proc, 240)
    finally:
        proc.kill()
        proc.wait(10)
    expected_uid = UID_BASE + proc.pid
    assert layers["namespaces"] == "active", layers
    assert layers["pid_namespace"].startswith("active"), layers
    assert layers["uid"].startswith(f"active (uid=gid={expected_uid}"), layers
    assert layers["nproc_limit"].startswith("active (256"), layers
    assert home in layers["exposed_dirs"], layers  # the mode-700 folder was shadowed, its clone bound back
    assert (first["pid"], first["uid"], first["gid"], first["groups"]) == (1, expected_uid, expected_uid, [])
    assert facts["write_outside"] in ("EROFS", "EACCES")
    assert facts["regain_root"] == "refused"
    assert facts["checkout_module"].startswith(str(clone))
    assert facts["cache_owner"] == facts["workdir_owner"] == expected_uid
    assert "secret.txt" not in facts["root_home_listing"]  # only what the child needs is visible there
    assert facts["kernel_ok"]
    assert not os.path.exists("/tmp/drkernel_sandbox_escape.txt")


def test_fork_bomb_is_contained_and_killing_the_caller_visible_pid_ends_it(private_workdir):
    skip_unless_host_has("pid_namespace", "uid", "nproc_limit")
    limit = 48
    proc, stream = run_driver(FORK_BOMB, private_workdir, REPO, preload=False, nproc=limit)
    uid = UID_BASE + proc.pid
    try:
        first = read_message(stream, proc, 120)
        require_layers(first["layers"], "pid_namespace", "uid", "nproc_limit")
        refused = read_message(stream, proc, 60)
        assert refused["kind"] == "refused" and refused["error"] == "Resource temporarily unavailable"
        population = len(processes_of(uid))
        assert 1 < population <= limit, population
    finally:
        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)  # only the pid the caller holds: no tree walk, no killpg
        proc.wait(30)
    deadline = time.monotonic() + 30
    while processes_of(uid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_of(uid) == [], "fork-bomb processes outlived the namespace"
    assert time.monotonic() - t0 < 30


# What an accelerator child reports about itself after isolate(): its uid and whether it is dumpable (PR_GET_DUMPABLE).
ACCELERATOR_PROBE = r"""
import ctypes
report(kind="facts", uid=os.getuid(), dumpable=ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))
"""


def test_evaluation_uids_are_distinct_and_above_every_per_pid_uid():
    uids = [group_uid() for _ in range(600)]
    assert len(set(uids[:512])) == 512  # a Verifier never has 512 groups alive at once
    assert min(uids) >= UID_GROUP_BASE >= UID_BASE + (1 << 22)  # CPU children: UID_BASE + pid, pid < 2**22
    assert max(uids) < UID_GROUP_BASE + (1 << 31) < 2**32 - 1


def accelerator_child(workdir: str, uid: int | None) -> tuple[dict, dict]:
    """The layers and the self-report of a child isolated as an accelerator child (with an evaluation uid or not)."""
    proc, stream = run_driver(ACCELERATOR_PROBE, workdir, REPO, False, 256, accelerator=True, uid=uid)
    try:
        return read_message(stream, proc, 120)["layers"], read_message(stream, proc, 60)
    finally:
        proc.kill()
        proc.wait(10)


def test_accelerator_child_drops_to_its_evaluations_uid_and_is_not_dumpable(private_workdir):
    """On a GPU the judge and both runners share the evaluation's uid (CUDA IPC needs it): none stays root, and
    each is non-dumpable, so the candidate of that uid cannot ptrace or read the memory of the other two."""
    skip_unless_host_has("uid")
    uid = group_uid()
    layers, facts = accelerator_child(private_workdir, uid)
    assert layers["uid"].startswith(f"active (uid=gid={uid}") and "not dumpable" in layers["uid"], layers
    assert layers["pid_namespace"].startswith("fallback"), layers  # CUDA fails in a PID namespace
    assert (facts["uid"], facts["dumpable"]) == (uid, 0)


def test_accelerator_child_without_an_evaluation_uid_keeps_root(private_workdir):
    skip_unless_host_has("uid")
    layers, facts = accelerator_child(private_workdir, None)
    assert layers["uid"].startswith("fallback: kept root on accelerators"), layers
    assert facts["uid"] == 0
