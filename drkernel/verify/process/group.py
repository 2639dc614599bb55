"""The children of one evaluation as one group: forked from the fork-server ahead of need or on demand, each in its
own empty private folder, handed its evaluation's sources and spec, then killed and reaped with every process and
file it left. A group serves exactly one evaluation (the caller, drkernel.verify.engine, keeps the spares)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import stat
import tempfile
from typing import Any

from drkernel.verify.process.entry import run as _entry
from drkernel.verify.process.forkserver import ChildProcess
from drkernel.verify.process.sandbox import descendants, group_uid
from drkernel.verify.result import Infra


def kill_group(proc: Any) -> None:
    """Kill every descendant of the child (it is their subreaper, so setsid or a double fork does not
    hide one), then its whole process group (it called setsid), then the child itself."""
    pid = proc.pid
    if pid is not None:
        for child in descendants(pid):
            try:
                os.kill(child, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if proc.exitcode is None:
        try:
            proc.kill()
        except (OSError, ValueError):
            pass


_SPARE_FILES = frozenset({"stdout.txt", "stderr.txt"})  # what a child writes in its folder before its spec
# On an accelerator a spare's warm-up may also make these (the judge compiles its comparison kernel: Triton's
# cache; a driver JIT: CUDA's); they must be real folders. On CPU no warm-up runs and none is allowed.
_SPARE_DIRS = frozenset({"triton_cache", "cuda_cache"})


class Group:
    """The children of one evaluation (judge, reference runner, candidate runner, and the replay child of a
    cpu_model evaluation), each in its own empty private folder, sandboxed and with its device initialised
    (drkernel.verify.process.spare), waiting for the ChildSpec that names its evaluation. Used by one evaluation, then
    killed: no process of a group ever serves a second evaluation."""

    def __init__(
        self, ctx: Any, device: str, interpret: bool, modelled: bool, memory_limit_mb: int, spare: bool
    ) -> None:
        self.root = tempfile.mkdtemp(prefix="drkernel-verify-")
        self.modelled = modelled
        self.spare = spare  # started ahead of its evaluation (by the spare filler): its children warm up
        self.allowed_dirs = _SPARE_DIRS if spare and device != "cpu" else frozenset()
        self.uid = group_uid() if device != "cpu" else None  # CPU children each drop to a uid of their own
        self.interpret = interpret
        self.refused: str | None = None  # why the spare this group stands in for was discarded
        roles = ("judge", "reference", "candidate") + (("replay",) if modelled else ())
        self.dirs = {role: os.path.join(self.root, role) for role in roles}
        self.procs: dict[str, Any] = {}
        self.starts: dict[str, Any] = {}
        for d in self.dirs.values():
            os.mkdir(d, 0o700)
        self.caller, judge_end = ctx.Pipe()
        jr, rj = ctx.Pipe()
        jc, cj = ctx.Pipe()
        jx, xj = ctx.Pipe() if modelled else (None, None)
        children = {
            "judge": ("drkernel.verify.judging.judge", (judge_end, jr, jc) + ((jx,) if modelled else ())),
            "reference": ("drkernel.verify.harness.reference_process", (rj,)),
            "candidate": ("drkernel.verify.harness.candidate_process", (cj,)),
        }
        if modelled:
            children["replay"] = ("drkernel.verify.cost_model.replay", (xj,))
        try:
            for role, (module, ends) in children.items():
                start_r, self.starts[role] = ctx.Pipe(duplex=False)
                p = ChildProcess(
                    target=_entry,
                    daemon=True,
                    interpret=interpret,
                    args=(
                        "drkernel.verify.process.spare",
                        "main",
                        module,
                        device,
                        self.dirs[role],
                        memory_limit_mb,
                        self.uid,
                        spare,
                    )
                    + (start_r, *ends),
                )
                p.start()
                start_r.close()
                self.procs[role] = p
        except BaseException:
            self.kill()
            self.reap()
            raise
        finally:
            for end in (judge_end, jr, jc, rj, cj, jx, xj):
                if end is not None:
                    end.close()

    def alive(self) -> bool:
        return all(p.exitcode is None for p in self.procs.values())

    def untouched(self) -> str | None:
        """Why this group's folders no longer look as its own children left them (None when they do): a spare
        waits while other evaluations run, and where the host gives no sandbox layer between evaluations
        (not root, no mount namespace) a candidate could plant files, or symlinks the caller would follow."""
        for role, d in self.dirs.items():
            names = set(os.listdir(d))
            extra = names - _SPARE_FILES - self.allowed_dirs
            if extra:
                return f"{role} folder holds {sorted(extra)}"
            for name in names & self.allowed_dirs:
                if not stat.S_ISDIR(os.lstat(os.path.join(d, name)).st_mode):
                    return f"{role} folder's {name} is not a folder"
            for name in _SPARE_FILES & set(os.listdir(d)):
                if not stat.S_ISREG(os.lstat(os.path.join(d, name)).st_mode):
                    return f"{role} folder's {name} is not a plain file"
        return None

    def hand(self, reference: str, candidate: str, spec_for: Any) -> None:
        """Write the sources into the private folders (new plain files only), then hand each child its spec."""
        for role, d in self.dirs.items():
            sources = {"reference.py": reference}
            if role in ("candidate", "replay"):
                sources["candidate.py"] = candidate
            for name, text in sources.items():
                fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                with open(fd, "w") as f:
                    f.write(text)
        try:
            for role, conn in self.starts.items():
                conn.send(dataclasses.replace(spec_for(self.dirs[role]), group_uid=self.uid))
                conn.close()
        except OSError as e:
            raise Infra("infra", f"an evaluation child died before its evaluation began: {e}") from e

    def kill(self) -> None:
        for p in self.procs.values():
            kill_group(p)

    def reap(self) -> None:
        if self.uid is not None:  # whatever of the evaluation's uid left the tree the kill walked (no PID namespace)
            _kill_uid(self.uid, self.interpret)
        for p in self.procs.values():
            p.join(5)
            remove_ipc_files(p.pid)
        for conn in self.starts.values():
            conn.close()
        shutil.rmtree(self.root, ignore_errors=True)


def _kill_uid(uid: int, interpret: bool) -> None:
    """sandbox.kill_uid in a child of the fork-server (it drops to the uid; this process has threads to fork)."""
    try:
        proc = ChildProcess(
            target=_entry, args=("drkernel.verify.process.sandbox", "kill_uid", uid), daemon=True, interpret=interpret
        )
        proc.start()
    except Exception:
        return  # the fork-server is gone: so are the children it forked (parent-death signal)
    proc.join(30)


def remove_ipc_files(pid: int | None) -> None:
    """CUDA IPC reference-counter files (/dev/shm/torch_<pid>_*) of a child killed before torch could
    unlink them; left behind, they fill /dev/shm one evaluation at a time."""
    if pid is None:
        return
    import glob

    for path in glob.glob(f"/dev/shm/torch_{pid}_*"):
        try:
            os.unlink(path)
        except OSError:
            pass
