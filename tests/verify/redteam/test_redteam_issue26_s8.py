"""Red team, issue 26, session 8: what the shared evaluation uid on accelerators and the spares let a candidate do.

On a GPU every child of one evaluation (judge, reference runner, candidate runner) runs as one uid, with no PID
namespace and the host's /proc (CUDA needs both). Non-dumpable stops ptrace and /proc/<pid>/mem, but the kernel
lets a process signal, renice and re-limit any process of its own uid. No GPU here: each test forks real processes
from this one and applies each role's own sandbox (`<role>.prepare("cuda", ...)`, what a spare runs), which on this
CPU box is the accelerator sandbox minus the device, then runs the attack in the candidate's process (code in that
process is assumed, as in test_redteam.py; the gate findings below say how far the gate lets it get).

The same-uid findings are closed by the candidate runner's seccomp filter (drkernel/verify/process/seccomp.py), which
candidate_process.prepare installs: with it off, the three CPU tests of part 1 fail."""

from __future__ import annotations

import contextlib
import functools
import importlib
import multiprocessing
import os
import resource
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_layers import skip_unless_host_has

from drkernel.verify import Verifier, VerifyOptions, engine
from drkernel.verify.process.group import Group
from drkernel.verify.process.sandbox import descendants, group_uid
from drkernel.verify.static.gate import check_source

pytestmark = pytest.mark.integration

CTX = multiprocessing.get_context("fork")
ROLES = {
    "judge": "drkernel.verify.judging.judge",
    "reference": "drkernel.verify.harness.reference_process",
    "candidate": "drkernel.verify.harness.candidate_process",
}


def _child(module: str, workdir: str, uid: int, payload: Callable[[Any], None], conn: Any) -> None:
    """A forked child: the role's own sandbox as a spare applies it on a GPU, then `payload`."""
    try:
        importlib.import_module(module).prepare("cuda", workdir, 4096, uid)
        conn.send({"pid": os.getpid(), "uid": os.getuid()})
        conn.recv()  # every role of the evaluation is sandboxed: the evaluation begins
        payload(conn)
    except BaseException as e:  # reported, never raised into a copy of pytest
        with contextlib.suppress(Exception):
            conn.send({"error": repr(e)})
    finally:
        os._exit(0)


def _idle(conn: Any) -> None:
    while True:  # a judge or reference runner between orders
        time.sleep(0.05)


def processes_of(uid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as f:
                    line = next(x for x in f if x.startswith("Uid:"))
            except (OSError, StopIteration):
                continue
            if int(line.split()[1]) == uid:
                found.append(int(entry))
    return found


def state_of(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@contextlib.contextmanager
def evaluation(roles: dict[str, Callable[[Any], None]]) -> Iterator[tuple[int, dict[str, Any], dict[str, Any]]]:
    """Forks the given roles as one accelerator evaluation (one group uid, one root-owned mode-700 folder):
    yields (uid, processes, first message of each); kills them as the engine kills a group."""
    skip_unless_host_has("namespaces", "uid")
    uid = group_uid()
    root = tempfile.mkdtemp(prefix="drkernel-verify-")
    procs: dict[str, Any] = {}
    conns: dict[str, Any] = {}
    try:
        for role, payload in roles.items():
            d = os.path.join(root, role)
            os.mkdir(d, 0o700)
            here, there = CTX.Pipe()
            p = CTX.Process(target=_child, args=(ROLES[role], d, uid, payload, there), daemon=True)
            p.start()
            there.close()
            procs[role], conns[role] = p, here
        first = {}
        for role, conn in conns.items():
            assert conn.poll(120), f"{role} did not start"
            first[role] = conn.recv()
            assert "error" not in first[role], first[role]
            assert first[role]["uid"] == uid
        for conn in conns.values():
            conn.send("go")
        yield uid, {"procs": procs, "conns": conns}, first
    finally:
        group = Group.__new__(Group)  # the engine's own teardown of a group's children
        group.procs, group.uid, group.interpret, group.starts, group.root = procs, uid, True, {}, root
        for p in procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGCONT)
        group.kill()
        group.reap()


# -- 1. same-uid interference with the judge and the reference runner ---------------------------------------------


def _sibling_pids() -> list[int]:
    """The candidate's view: every process of its own uid but itself (the host's /proc, no PID namespace)."""
    me = os.getpid()
    return [pid for pid in processes_of(os.getuid()) if pid != me]


def _on_siblings(act: Callable[[int], None], word: str, conn: Any) -> None:
    """The candidate applies `act` to every other process of its uid and reports what happened to each."""
    done = {}
    for pid in _sibling_pids():
        try:
            act(pid)
            done[pid] = word
        except OSError as e:
            done[pid] = e.strerror
    conn.send(done)
    _idle(conn)


def _stop(pid: int) -> None:
    """The speedup attack's core: SIGSTOP the reference runner while the judge's clock runs on its round trip
    (a thread of the candidate watches /proc/<pid>/stat for R, stops it for a few ms, SIGCONTs it)."""
    os.kill(pid, signal.SIGSTOP)


def _starve(pid: int) -> None:
    """Quieter than a signal: lowest priority, SCHED_IDLE and the candidate's own CPU for the reference runner."""
    os.setpriority(os.PRIO_PROCESS, pid, 19)
    os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    os.sched_setaffinity(pid, {min(os.sched_getaffinity(0))})


def _limit(pid: int) -> None:
    """prlimit on a same-uid process: no open files left makes the reference runner fail (an infra error that
    masks a wrong candidate, or an out-of-memory re-run) on its next order."""
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (0, 0))


_stop_siblings = functools.partial(_on_siblings, _stop, "stopped")
_starve_siblings = functools.partial(_on_siblings, _starve, "starved")
_limit_siblings = functools.partial(_on_siblings, _limit, "limited")


def test_candidate_cannot_stop_its_reference_runner_or_judge():
    with evaluation({"judge": _idle, "reference": _idle, "candidate": _stop_siblings}) as (_, run, first):
        assert run["conns"]["candidate"].poll(60)
        report = run["conns"]["candidate"].recv()
        stopped = set()
        for _ in range(20):  # a signal is delivered asynchronously: look for a while
            stopped |= {role for role in ("judge", "reference") if state_of(first[role]["pid"]) in "tT"}
            time.sleep(0.05)
    assert not stopped, f"the candidate stopped its {sorted(stopped)} (its signals: {report})"


def test_candidate_cannot_starve_its_reference_runner():
    with evaluation({"reference": _idle, "candidate": _starve_siblings}) as (_, run, first):
        assert run["conns"]["candidate"].poll(60)
        report = run["conns"]["candidate"].recv()
        ref = first["reference"]["pid"]
        policy, nice = os.sched_getscheduler(ref), os.getpriority(os.PRIO_PROCESS, ref)
    inherited = (os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0))  # what the fork gave it (a niced run)
    assert (policy, nice) == inherited, f"candidate: {report}; reference policy {policy}, nice {nice}"


def test_candidate_cannot_change_its_reference_runners_limits():
    with evaluation({"reference": _idle, "candidate": _limit_siblings}) as (_, run, first):
        assert run["conns"]["candidate"].poll(60)
        report = run["conns"]["candidate"].recv()
        with open(f"/proc/{first['reference']['pid']}/limits") as f:
            limit = next(line for line in f if line.startswith("Max open files")).split()[3:5]
    assert limit != ["0", "0"], f"candidate: {report}"


HERE = Path(__file__).parent
REF = (HERE.parent / "candidates" / "ref_add_relu.py").read_text()
HONEST = (HERE.parent / "candidates" / "honest_add_relu.py").read_text()
STALL = (HERE / "stall_reference.py").read_text()


def test_on_cpu_the_stalling_candidate_finds_no_process_of_its_uid():
    """The same attack through the whole Verifier on CPU: each child has its own uid and PID namespace there."""
    skip_unless_host_has("pid_namespace", "uid")
    options = VerifyOptions(device="cpu", num_correct_trials=1, num_perf_trials=2, num_warmup=1, timeout_s=300)
    with Verifier(device="cpu", max_concurrency=1) as v:
        r = v._verify_ungated(REF, HONEST + "\n" + STALL, options)
    assert r.correct, r.error
    assert "STALL: no process of this uid but mine" in r.details.get("candidate_stdout", ""), r.details


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs an NVIDIA GPU")
def test_on_a_gpu_the_candidate_cannot_stall_its_reference_runner():
    """Seen on the H200 (benchmarks/results/redteam_issue26_s8_h200.log): reward 2.5 for a kernel worth 1.4-1.6."""
    options = VerifyOptions(device="cuda")
    with Verifier(device="cuda", max_concurrency=1) as v:
        v.warm_spares(options)
        r = v._verify_ungated(REF, HONEST + "\n" + STALL, options)
    assert r.correct, r.error
    assert "STALL: stopped the reference runner" not in r.details.get("candidate_stdout", ""), r.details


# -- 2. a process tree that outlives its evaluation (no PID namespace on accelerators) ----------------------------


def _detached_child(conn: Any) -> None:
    """Stop being the subreaper the sandbox made this process, then double-fork and setsid: the grandchild is
    re-parented outside the candidate's tree and process group, so the engine's walk of the tree and its
    killpg both miss it (on CPU the PID namespace would end it with the candidate). It ends itself after 20 s."""
    import ctypes

    ctypes.CDLL(None).prctl(36, 0, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER off
    if os.fork() == 0:
        if os.fork():
            os._exit(0)
        os.setsid()
        time.sleep(20)
        os._exit(0)
    os.wait()
    conn.send({"detached": "started"})
    _idle(conn)


def test_a_candidates_process_does_not_outlive_its_evaluation():
    """Found: such a process survived the engine's teardown and kept the evaluation's uid, which group_uid()
    hands out again 512 groups later (one H200 training step is 768 evaluations): from there it could stop or
    starve a later evaluation's reference runner as above. Fixed: Group.kill also kills every process of the
    group's uid (one kill(-1) as that uid)."""
    with evaluation({"candidate": _detached_child}) as (uid, run, _):
        assert run["conns"]["candidate"].poll(60)
        assert run["conns"]["candidate"].recv() == {"detached": "started"}
        time.sleep(0.5)
    deadline = time.monotonic() + 3
    while processes_of(uid) and time.monotonic() < deadline:
        time.sleep(0.1)
    survivors = processes_of(uid)
    try:
        assert survivors == [], f"processes of evaluation uid {uid} outlived its group: {survivors}"
    finally:
        end = time.monotonic() + 25  # the chain ends itself after 20 s
        while processes_of(uid) and time.monotonic() < end:
            time.sleep(0.2)


# -- 3. the static gate: file access and sibling pids past `open` and `os` ----------------------------------------

GATE_HEAD = "import torch\nimport triton\nimport triton.language as tl\n"
GATE_TAIL = "\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


@pytest.mark.parametrize(
    "line",
    [
        "torch.cuda.tunable.set_filename('/dev/shm/planted.csv')",  # TunableOp writes its results there
        "torch.cuda.tunable.write_file('/dev/shm/planted.csv')",
        "torch.cuda.tunable.read_file('/proc/1/environ')",
        "torch.cuda.gds.GdsFile('/dev/shm/planted.bin', 66)",  # cuFile: open any path, load/save storages
        "torch.cuda.list_gpu_processes()",  # NVML: the pids of the judge and reference runner (signal targets)
    ],
)
def test_gate_refuses_file_access_and_process_listing_through_torch_cuda(line):
    """Found: each passed check_source (`open`, `os` and `.tofile` are refused; these reach the same through
    torch.cuda). On a GPU /dev stays writable in the sandbox, and /dev/shm is shared by every evaluation."""
    result = check_source(GATE_HEAD + line + GATE_TAIL, False)
    assert not result.passed and result.kind == "forbidden", result


# -- 4. spares where no uid separates evaluations -------------------------------------------------------------------


def test_no_default_spares_where_children_keep_the_callers_uid():
    """Found: spares were on by default on CUDA whatever the caller's uid. Run as a non-root user, no child drops to
    an evaluation uid and there are no namespaces: a candidate runs as the caller and can write into every idle
    spare's folders, and untouched() accepts anything inside a judge's triton_cache folder (a compiled comparison
    kernel the judge, which is trusted, would load). Fixed: default_spares() gives none unless root."""
    skip_unless_host_has("uid")
    assert engine.default_spares("cuda") == engine.DEFAULT_SPARES["cuda"] > 0
    here, there = CTX.Pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            there.send(engine.default_spares("cuda"))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert here.recv() == 0


# -- 5. a judge that dies mid-evaluation -----------------------------------------------------------------------------

SLOW_IMPORT = "import time\ntime.sleep(120)\n"


def test_a_dead_judge_is_reported_at_once_not_after_the_timeout():
    """Found on the H200: a candidate that SIGKILLed its judge (same uid) got a 180 s "timeout" verdict. At the
    judge's EOF the caller's poll() stays true, so its loop spun (a core at 100 %) until the evaluation's
    timeout. Fixed: the closed channel ends the conversation; on CPU, where no candidate reaches the judge, as
    an infra error; on accelerators as the candidate's crash (reward 0, not a masked sample)."""
    options = VerifyOptions(device="cpu", num_correct_trials=1, timeout_s=60)
    with Verifier(device="cpu", max_concurrency=1, spares=1) as v:
        assert v.warm_spares(options) == 1
        judge = v._pools[v._group_key(options)][0].procs["judge"]  # the spare group the evaluation will claim
        done: dict[str, Any] = {}
        worker = threading.Thread(target=lambda: done.update(r=v._verify_ungated(REF, SLOW_IMPORT + HONEST, options)))
        worker.start()
        time.sleep(2)  # the candidate is importing (it sleeps 120 s there)
        # The process that holds the judge's end of the pipe, as a GPU candidate kills it: on CPU the judge is pid 1
        # of its PID namespace, below the caller-visible pid (which then exits with the same signal).
        for pid in descendants(judge.pid) or [judge.pid]:
            os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        worker.join(120)
        waited = time.monotonic() - t0
    r = done["r"]
    assert r.status == "infra_error" and "the judge exited" in r.error.message, (r.status, r.error, f"{waited:.0f} s")
