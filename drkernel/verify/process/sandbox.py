"""Isolation of an evaluation child: what Linux lets a process started as root do to itself.

Layers, each tried independently and reported in the returned dict (`details.isolation`); when the
OS refuses one (no CAP_SYS_ADMIN, a seccomp profile, a user namespace without the uid, a non-Linux
host) the evaluation goes on with the layers that did apply and the dict says which fell back and why:
- own mount + network namespace, every mount read-only except the private dir (on a GPU host /dev,
  /proc and /sys stay writable or CUDA cannot initialise: shared/research/sandbox_probe.md);
- directories an unprivileged uid cannot traverse (a mode-700 home holding the interpreter, the
  venv or the checkout) are shadowed by an empty tmpfs in that namespace, with only the paths the
  child needs bound back, so the child can drop root and still import what it has not imported yet;
- a PID namespace: the process forks once more and the code that continues is pid 1 of a fresh
  namespace. The outer process only waits and passes the exit status on. Killing the outer process
  (the pid the caller holds) kills pid 1 (parent-death signal), and the kernel then kills every
  process left in the namespace, so nothing a candidate started survives, however it detached;
- its own unprivileged uid and gid (derived from the host pid, so concurrent evaluations never share
  one; no supplementary groups except those that own accelerator device nodes), no_new_privs, and
  RLIMIT_NPROC, which the kernel enforces per uid: a fork bomb stops at the limit;
- rlimits on core, file size and (CPU only) address space; a scrubbed environment.
"""

from __future__ import annotations

import ctypes
import errno
import glob
import itertools
import os
import resource
import select
import signal
import stat
import sys
import tempfile

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
# Evaluation uids: UID_BASE + the host pid of the process that called isolate() (pid_max <= 2**22), far
# above the ranges distributions and container runtimes hand out (subordinate uids start at 100000).
UID_BASE = 0x7E000000
# On accelerators the children of one evaluation share one uid (CUDA IPC maps a buffer only into a process of the
# exporter's uid: measured on the H200, .gpu experiment of issue 26), and evaluations never share one: the
# Verifier's pid (< 2**22) and a per-process count (mod 512: far more than the groups alive at once) name it,
# above the per-pid uids of CPU children.
UID_GROUP_BASE = UID_BASE + (1 << 22)
_GROUP_COUNT = itertools.count()
_CAPTURED: list[tuple[str, str]] = []  # where this process's fds 1 and 2 already go (capture_output)
# Accelerator device nodes the child must still open after dropping root (NVIDIA, DRM, Ascend; not
# /dev/nvidia-caps, which only MIG administration opens).
DEVICE_NODES = ("/dev/nvidia*", "/dev/dri/*", "/dev/davinci*", "/dev/devmm_svm", "/dev/hisi_hdc", "/dev/kfd")

_KEEP_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "CUDA_VISIBLE_DEVICES",
    "ASCEND_RT_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
    "ASCEND_HOME_PATH",
    "ASCEND_TOOLKIT_HOME",
    "ASCEND_OPP_PATH",
    "NVIDIA_VISIBLE_DEVICES",
)


def group_uid() -> int:
    """A fresh uid for the children of one accelerator evaluation (see UID_GROUP_BASE)."""
    return UID_GROUP_BASE + (os.getpid() << 9) + next(_GROUP_COUNT) % 512


def kill_uid(uid: int) -> None:
    """SIGKILL every process of an accelerator evaluation's uid (see group_uid); changes this process's uid, so it
    runs in a throwaway child. Without a PID namespace a candidate's process can leave the tree the caller walks
    (it turns off the subreaper, double-forks and calls setsid) and would live on with that uid, which a later
    group reuses. kill(-1) sent as the uid reaches every process of it and nothing else, in one step: the kernel
    walks the task list under its lock, and a fork with a fatal signal pending fails. Not root: nothing dropped
    to the uid, and nothing is sent."""
    if uid < UID_GROUP_BASE:
        raise ValueError(f"{uid} is not an evaluation group's uid")
    try:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    except OSError:
        return
    if os.getresuid() == (uid, uid, uid):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass  # no process of the uid left


def libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _mount_points() -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            raw = line.split()[4]
            points.append(raw.encode().decode("unicode_escape"))  # octal escapes such as \040 for a space
    return points


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _world_searchable(path: str) -> bool:
    try:
        return bool(os.stat(path).st_mode & stat.S_IXOTH)
    except OSError:
        return False


def _hidden_ancestor(path: str) -> str | None:
    """The top-most directory above `path` that a uid other than its owner cannot traverse."""
    current = "/"
    for part in path.strip("/").split("/")[:-1]:
        current = os.path.join(current, part)
        if not _world_searchable(current):
            return current
    return None


def needed_paths(private_dir: str) -> list[str]:
    """What a child may still open after dropping root: the interpreter and its libraries, every import
    root (sys.path and the folders of imported top-level packages, e.g. an editable checkout), the
    private dir."""
    found = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        private_dir,
        os.path.dirname(os.path.realpath(sys.executable)),
    }
    found.update(p for p in sys.path if os.path.isabs(p))
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if "." not in name and isinstance(path, str):
            found.add(os.path.dirname(os.path.dirname(path)) if path.endswith("__init__.py") else os.path.dirname(path))
    return sorted({os.path.realpath(p) for p in found if p and os.path.exists(p)})


def _expose(paths: list[str]) -> list[str]:
    """In this mount namespace, shadow each untraversable ancestor of a needed path with an empty tmpfs
    (mode 755) and bind the needed paths back into it; the rest of that directory disappears. Rounds
    repeat for a locked directory further down a path that was bound back."""
    shadowed: list[str] = []
    for _ in range(8):
        by_ancestor: dict[str, list[str]] = {}
        for path in paths:
            top = _hidden_ancestor(path)
            if top is not None:
                by_ancestor.setdefault(top, []).append(path)
        if not by_ancestor:
            break
        for top in sorted(by_ancestor, key=len):
            if any(_under(top, (done,)) for done in shadowed[-len(by_ancestor) :] if done != top):
                continue  # below a directory shadowed in this round: the next round sees it afresh
            group = sorted(by_ancestor[top])
            _shadow(top, [p for i, p in enumerate(group) if not any(_under(p, (q,)) for q in group[:i])])
            shadowed.append(top)
    return shadowed


def _shadow(top: str, keep_paths: list[str]) -> None:
    lib = libc()
    keep = {p: os.open(p, os.O_PATH | os.O_CLOEXEC) for p in keep_paths}
    try:
        if lib.mount(b"tmpfs", top.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755,size=1m") != 0:
            raise OSError(ctypes.get_errno(), f"tmpfs over {top}: {os.strerror(ctypes.get_errno())}")
        for path, fd in keep.items():
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(path, 0o755, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
                open(path, "a").close()
            if lib.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None, MS_BIND | MS_REC, None) != 0:
                raise OSError(ctypes.get_errno(), f"bind {path}: {os.strerror(ctypes.get_errno())}")
    finally:
        for fd in keep.values():
            os.close(fd)


def _namespaces(
    private_dir: str, keep_writable: tuple[str, ...], pid_namespace: bool, expose: list[str] | None
) -> tuple[str, str, str]:
    """New mount + network (+ PID) namespace; everything but `private_dir` (and `keep_writable`) read-only.

    Returns (mount/net status, PID namespace status, shadowed dirs). The PID namespace applies to
    children only: the caller must fork next (see isolate)."""
    lib = libc()
    flags = CLONE_NEWNS | CLONE_NEWNET
    pid_status = "not requested"
    if pid_namespace:
        if lib.unshare(flags | CLONE_NEWPID) == 0:
            flags, pid_status = 0, "pending"
        else:
            pid_status = f"unavailable (unshare: {os.strerror(ctypes.get_errno())})"
    if flags and lib.unshare(flags) != 0:
        return f"unavailable (unshare: {os.strerror(ctypes.get_errno())})", pid_status, "no mount namespace"
    if lib.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return f"network only (make / private: {os.strerror(ctypes.get_errno())})", pid_status, "not attempted"
    priv = os.path.realpath(private_dir)
    shadowed = "nothing to expose"
    if expose:
        old_umask = os.umask(0o022)
        try:
            shadowed = ", ".join(_expose(expose)) or "nothing to expose"
        except OSError as e:
            shadowed = f"failed ({e})"
        finally:
            os.umask(old_umask)
    if lib.mount(priv.encode(), priv.encode(), None, MS_BIND | MS_REC, None) != 0:
        return f"network only (bind private dir: {os.strerror(ctypes.get_errno())})", pid_status, shadowed
    failed = 0
    for point in _mount_points():
        if _under(point, (priv,)) or _under(point, keep_writable):
            continue
        if lib.mount(None, point.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None) != 0:
            failed += 1
    status = "active" if failed == 0 else f"active ({failed} mounts stayed writable)"
    return status, pid_status, shadowed


def _enter_pid_namespace() -> int:
    """Fork into the PID namespace unshared before; only the child (pid 1 there) returns, with the read
    end of a pipe whose write end only the parent holds (see _arm_parent_death).

    The parent keeps the caller-visible pid: it closes every inherited descriptor (so channels see EOF
    when the child ends), waits, and leaves with the child's status, dying of the same signal if the
    child was killed, so exit codes read as before. If the parent is killed, the child gets SIGKILL
    (parent-death signal) and the kernel kills the whole namespace with it."""
    alive_r, alive_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(alive_w)
        _arm_parent_death(alive_r)
        return alive_r
    os.close(alive_r)
    os.closerange(3, alive_w)  # keep alive_w: its closing (at this process's death) is the child's signal
    os.closerange(alive_w + 1, max(_max_fd(), alive_w + 1))
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _arm_parent_death(alive_r: int | None) -> None:
    """SIGKILL this process when its parent dies. The kernel clears this setting whenever the uid or gid
    changes, so it is armed again after dropping privileges; a parent that died before the call is
    seen as the closed pipe (or, without one, as a new parent)."""
    parent = os.getppid()
    libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if alive_r is not None:
        if select.select([alive_r], [], [], 0)[0]:  # EOF: every write end is closed, the parent is gone
            os._exit(1)
    elif os.getppid() != parent:
        os._exit(1)


def _max_fd() -> int:
    try:
        return max(int(fd) for fd in os.listdir("/proc/self/fd")) + 1
    except (OSError, ValueError):
        return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _device_groups() -> tuple[list[int], str | None]:
    """Groups that open the accelerator device nodes for a non-root uid; a reason when none can."""
    groups = set()
    for pattern in DEVICE_NODES:
        for node in glob.glob(pattern):
            st = os.stat(node)
            if not stat.S_ISCHR(st.st_mode) or st.st_mode & 0o006 == 0o006:
                continue
            if st.st_gid == 0 or st.st_mode & 0o060 != 0o060:
                return [], f"{node} is usable by root only (mode {stat.filemode(st.st_mode)}, gid {st.st_gid})"
            groups.add(st.st_gid)
    return sorted(groups), None


def _drop_privileges(private_dir: str, uid: int, on_accelerator: bool, nproc_limit: int) -> tuple[str, str]:
    """Own uid/gid, no groups but device groups, no_new_privs, RLIMIT_NPROC; returns (uid, nproc) statuses."""
    groups: list[int] = []
    if on_accelerator:
        groups, reason = _device_groups()
        if reason:
            return f"fallback: kept root ({reason})", "not enforced (root is exempt)"
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc_limit, nproc_limit))
    except (ValueError, OSError) as e:
        return f"fallback: kept root (RLIMIT_NPROC: {e})", "unavailable"
    for root, dirs, files in os.walk(private_dir):
        for name in [root] + [os.path.join(root, n) for n in dirs + files]:
            os.lchown(name, uid, uid)
    try:
        os.setgroups(groups)
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    except OSError as e:
        return f"fallback: kept root (setresuid {uid}: {e.strerror})", "not enforced (root is exempt)"
    try:
        os.setresuid(0, 0, 0)
        return "fallback: root could be regained", "not enforced"
    except PermissionError:
        pass
    nnp = libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
    # Not dumpable: another process of this uid (on an accelerator, the evaluation's candidate) can neither
    # ptrace this one nor open its /proc/<pid>/mem. The uid change already resets the flag where
    # fs.suid_dumpable is 0; this holds for any host setting.
    nodump = libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    return (
        f"active (uid=gid={uid}, groups={groups}{', no_new_privs' if nnp else ''}{', not dumpable' if nodump else ''})",
        f"active ({nproc_limit} processes+threads for this uid)",
    )


def _rlimits(memory_limit_mb: int | None, file_limit_bytes: int) -> list[str]:
    applied = []
    for name, limit in (("core", (resource.RLIMIT_CORE, 0)), ("fsize", (resource.RLIMIT_FSIZE, file_limit_bytes))):
        try:
            resource.setrlimit(limit[0], (limit[1], limit[1]))
            applied.append(name)
        except (ValueError, OSError):
            pass
    if memory_limit_mb is not None:
        try:
            as_bytes = memory_limit_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (as_bytes, as_bytes))
            applied.append(f"as={memory_limit_mb}MB")
        except (ValueError, OSError):
            pass
    return applied


def scrub_environment(private_dir: str, extra: dict[str, str]) -> None:
    """Keep only what a device runtime needs; point every cache and temp path into `private_dir`."""
    kept = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    os.environ.clear()
    os.environ.update(kept)
    for key in ("HOME", "TMPDIR", "TMP", "TEMP"):
        os.environ[key] = private_dir
    os.environ["USER"] = os.environ["LOGNAME"] = "drkernel-eval"  # the eval uid has no passwd entry
    os.environ["TRITON_CACHE_DIR"] = os.path.join(private_dir, "triton_cache")
    os.environ["CUDA_CACHE_PATH"] = os.path.join(private_dir, "cuda_cache")
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    os.environ.update(extra)
    tempfile.tempdir = private_dir  # the fork-server may have cached "/tmp" (read-only in here)


def capture_output(private_dir: str) -> tuple[str, str]:
    """Send fds 1 and 2 to files in the private dir, so nothing the child prints reaches the caller. Once per
    process: a spare's entry point prepares again with the same folder, and what its warm-up printed stays."""
    paths = (os.path.join(private_dir, "stdout.txt"), os.path.join(private_dir, "stderr.txt"))
    if _CAPTURED:
        if _CAPTURED[0] != paths:
            raise RuntimeError("this process already captures its output into another folder")
        return paths
    _CAPTURED.append(paths)
    for stream, fd, path in ((sys.stdout, 1, paths[0]), (sys.stderr, 2, paths[1])):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):
            pass
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    return paths


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid` (children lists in /proc, followed recursively).

    Pids are those of the /proc mount (the host's): asked for itself from inside a PID namespace,
    where os.getpid() is 1, a process is looked up through /proc/self."""
    if pid == os.getpid():
        try:
            pid = int(os.readlink("/proc/self"))
        except (OSError, ValueError):
            pass
    found: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            tids = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{current}/task/{tid}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


_REPLACED = "[{} was replaced by something other than the captured file: not read]"


def read_tail(path: str, limit: int) -> str:
    """The last `limit` bytes of a captured stream (decoded leniently). The candidate owns the folder, so it may
    have swapped the file: a symlink would make this (trusted, unsandboxed) caller copy a host file into the
    verdict, a FIFO would block it for good, a hard link would name a file the candidate cannot read. Only
    the candidate's own regular file with one link is read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        return _REPLACED.format(os.path.basename(path)) if e.errno == errno.ELOOP else ""
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return _REPLACED.format(os.path.basename(path))
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - limit))
        data = f.read()
    text = data.decode("utf-8", errors="replace")
    return (f"[... {size - limit} bytes cut]\n" + text) if size > limit else text


_APPLIED: list[tuple[tuple[object, ...], dict[str, str]]] = []  # the settings and layers this process applied


def isolate(
    private_dir: str,
    *,
    on_accelerator: bool,
    memory_limit_mb: int | None,
    file_limit_bytes: int = 256 * 1024 * 1024,
    env: dict[str, str] | None = None,
    pid_namespace: bool = True,
    drop_privileges: bool = True,
    uid: int | None = None,
    nproc_limit: int | None = None,
) -> dict[str, str]:
    """Apply every isolation layer to the calling process; return what each layer did.

    Call it first thing in a freshly forked child, before anything else opens files or starts threads.
    With `pid_namespace` (default) this function forks: the process that returns is a new one (pid 1
    of its namespace, same descriptors), while the pid the caller holds is its waiting parent; kill
    that pid (or its process group) to end everything. `uid` defaults to UID_BASE + the caller-visible
    pid (unique among live evaluations); `nproc_limit` (processes + threads of that uid) defaults to
    128 + 4 per CPU. The defaults need no change at existing call sites.

    A process isolates once: a spare child (drkernel.verify.process.spare) isolates before its evaluation is known and
    its entry point calls this again; a repeat with the same settings returns the layers already applied, one
    with other settings raises (the sandbox cannot be loosened or re-applied)."""
    key = (private_dir, on_accelerator, memory_limit_mb, file_limit_bytes, tuple(sorted((env or {}).items())))
    key += (pid_namespace, drop_privileges, uid, nproc_limit)
    if _APPLIED:
        if _APPLIED[0][0] != key:
            raise RuntimeError("this process is already isolated with other settings")
        return dict(_APPLIED[0][1])
    layers = _isolate(
        private_dir,
        on_accelerator=on_accelerator,
        memory_limit_mb=memory_limit_mb,
        file_limit_bytes=file_limit_bytes,
        env=env,
        pid_namespace=pid_namespace,
        drop_privileges=drop_privileges,
        uid=uid,
        nproc_limit=nproc_limit,
    )
    _APPLIED.append((key, dict(layers)))
    return layers


def _isolate(
    private_dir: str,
    *,
    on_accelerator: bool,
    memory_limit_mb: int | None,
    file_limit_bytes: int,
    env: dict[str, str] | None,
    pid_namespace: bool,
    drop_privileges: bool,
    uid: int | None,
    nproc_limit: int | None,
) -> dict[str, str]:
    layers: dict[str, str] = {}
    host_pid = os.getpid()
    os.setsid()  # own process group: a timeout kills the group with one killpg
    layers["process_group"] = "active"
    linux = sys.platform.startswith("linux")
    alive_r: int | None = None
    want_drop = drop_privileges and linux and os.geteuid() == 0
    needed = needed_paths(private_dir) if want_drop else []
    pid_status = "unavailable (not Linux)"
    if linux:
        keep = ("/dev", "/proc", "/sys") if on_accelerator else ()
        # Measured on the H200 (CUDA 13 driver): cudaGetDeviceCount fails with error 304 inside a new PID
        # namespace, while the unprivileged uid and the mount/net namespaces work. On accelerators the tree is
        # therefore contained by its process group, the subreaper and RLIMIT_NPROC instead.
        use_pid_ns = pid_namespace and not on_accelerator
        try:
            layers["namespaces"], pid_status, layers["exposed_dirs"] = _namespaces(
                private_dir, keep, use_pid_ns, needed or None
            )
            if pid_namespace and on_accelerator:
                pid_status = (
                    "fallback: not used on accelerators (the CUDA driver fails to initialise in a "
                    "new PID namespace); process group + subreaper + nproc limit contain the tree"
                )
        except OSError as e:
            layers["namespaces"] = f"unavailable ({e})"
        try:
            _arm_parent_death(None)  # die with the fork-server
            layers["parent_death_signal"] = "active"
        except (OSError, AttributeError):
            layers["parent_death_signal"] = "unavailable"
        # PR_SET_CHILD_SUBREAPER: orphans of a double fork re-parent to this child, not to init, so the
        # caller finds every descendant (even one that called setsid) in one walk of /proc and kills it.
        ok = libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        layers["subreaper"] = "active" if ok else f"unavailable ({os.strerror(ctypes.get_errno())})"
        if pid_status == "pending":
            alive_r = _enter_pid_namespace()
            pid_status = f"active (pid {os.getpid()} of its own namespace; the caller-visible pid {host_pid} waits)"
    else:
        layers["namespaces"] = "unavailable (not Linux)"
    layers["pid_namespace"] = pid_status
    applied = _rlimits(None if on_accelerator else memory_limit_mb, file_limit_bytes)
    layers["rlimits"] = ",".join(applied) if applied else "unavailable"
    if on_accelerator:
        layers["rlimits"] += " (no address-space limit on accelerators: the driver maps huge ranges)"
    scrub_environment(private_dir, env or {})
    layers["environment"] = "scrubbed"
    limit = nproc_limit if nproc_limit is not None else 128 + 4 * (os.cpu_count() or 1)
    if on_accelerator and nproc_limit is None:
        limit *= 3  # the judge, the reference runner and the candidate share the evaluation's uid
    if not drop_privileges:
        layers["uid"], layers["nproc_limit"] = "not requested", "not set (root is exempt)"
    elif want_drop and on_accelerator and uid is None:
        # Measured on the H200: with judge, reference runner and candidate under different uids the runners die
        # on the judge's CUDA IPC buffers; one uid per evaluation (group_uid) works. Without one: root.
        layers["uid"] = "fallback: kept root on accelerators (no evaluation uid given; CUDA IPC needs one uid)"
        layers["nproc_limit"] = "not enforced (root is exempt)"
    elif not want_drop:
        layers["uid"] = f"unavailable ({'not Linux' if not linux else f'not root: runs as uid {os.geteuid()}'})"
        layers["nproc_limit"] = "not set (a shared uid's limit would count unrelated processes)"
    else:
        hidden = next((p for p in needed if _hidden_ancestor(p)), None)
        if hidden is not None:
            layers["uid"] = (
                f"fallback: kept root ({hidden} lies below {_hidden_ancestor(hidden)}, which only its "
                "owner can enter, and no mount namespace could expose it)"
            )
            layers["nproc_limit"] = "not enforced (root is exempt)"
        else:
            layers["uid"], layers["nproc_limit"] = _drop_privileges(
                private_dir, uid if uid is not None else UID_BASE + host_pid, on_accelerator, limit
            )
            if layers.get("parent_death_signal") == "active":
                _arm_parent_death(alive_r)
    if alive_r is not None:
        os.close(alive_r)
    os.chdir(private_dir)
    return layers
