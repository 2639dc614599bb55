"""Isolation of an evaluation child: what Linux lets an unprivileged-looking process do to itself.

Each layer is tried independently and reported; when the OS refuses one (no CAP_SYS_ADMIN, a
seccomp profile, a non-Linux host) the evaluation goes on with the layers that did apply and the
result says which ones were active. Recipe measured in shared/research/sandbox_probe.md: on a GPU
host /dev, /proc and /sys must stay writable or CUDA cannot initialise.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys
import tempfile

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

_KEEP_ENV = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
             "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH", "NVIDIA_VISIBLE_DEVICES")


def _libc() -> ctypes.CDLL:
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


def _namespaces(private_dir: str, keep_writable: tuple[str, ...]) -> str:
    """New mount + network namespace; everything but `private_dir` (and `keep_writable`) read-only."""
    libc = _libc()
    if libc.unshare(CLONE_NEWNS | CLONE_NEWNET) != 0:
        return f"unavailable (unshare: {os.strerror(ctypes.get_errno())})"
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return f"network only (make / private: {os.strerror(ctypes.get_errno())})"
    priv = os.path.realpath(private_dir)
    if libc.mount(priv.encode(), priv.encode(), None, MS_BIND | MS_REC, None) != 0:
        return f"network only (bind private dir: {os.strerror(ctypes.get_errno())})"
    failed = 0
    for point in _mount_points():
        if _under(point, (priv,)) or _under(point, keep_writable):
            continue
        if libc.mount(None, point.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None) != 0:
            failed += 1
    return "active" if failed == 0 else f"active ({failed} mounts stayed writable)"


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
    os.environ["TRITON_CACHE_DIR"] = os.path.join(private_dir, "triton_cache")
    os.environ["CUDA_CACHE_PATH"] = os.path.join(private_dir, "cuda_cache")
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    os.environ.update(extra)
    tempfile.tempdir = private_dir  # the fork-server may have cached "/tmp" (read-only in here)


def capture_output(private_dir: str) -> tuple[str, str]:
    """Send fds 1 and 2 to files in the private dir, so nothing the child prints reaches the caller."""
    paths = (os.path.join(private_dir, "stdout.txt"), os.path.join(private_dir, "stderr.txt"))
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
    """Every live descendant of `pid` (children lists in /proc, followed recursively)."""
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


def read_tail(path: str, limit: int) -> str:
    """The last `limit` bytes of a captured stream (decoded leniently)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return (f"[... {size - limit} bytes cut]\n" + text) if size > limit else text


def isolate(private_dir: str, *, on_accelerator: bool, memory_limit_mb: int | None,
            file_limit_bytes: int = 256 * 1024 * 1024, env: dict[str, str] | None = None) -> dict[str, str]:
    """Apply every isolation layer to the calling process; return what each layer did."""
    layers: dict[str, str] = {}
    os.setsid()  # own process group: a timeout kills the group with one killpg
    layers["process_group"] = "active"
    if sys.platform.startswith("linux"):
        keep = ("/dev", "/proc", "/sys") if on_accelerator else ()
        try:
            layers["namespaces"] = _namespaces(private_dir, keep)
        except OSError as e:
            layers["namespaces"] = f"unavailable ({e})"
        try:
            _libc().prctl(1, 9)  # PR_SET_PDEATHSIG = SIGKILL: die with the fork-server
            layers["parent_death_signal"] = "active"
        except (OSError, AttributeError):
            layers["parent_death_signal"] = "unavailable"
        # PR_SET_CHILD_SUBREAPER: orphans of a double fork re-parent to this child, not to init, so the
        # caller finds every descendant (even one that called setsid) in one walk of /proc and kills it.
        ok = _libc().prctl(36, 1, 0, 0, 0) == 0
        layers["subreaper"] = "active" if ok else f"unavailable ({os.strerror(ctypes.get_errno())})"
    else:
        layers["namespaces"] = "unavailable (not Linux)"
    applied = _rlimits(None if on_accelerator else memory_limit_mb, file_limit_bytes)
    layers["rlimits"] = ",".join(applied) if applied else "unavailable"
    if on_accelerator:
        layers["rlimits"] += " (no address-space limit on accelerators: the driver maps huge ranges)"
    layers["nproc_limit"] = "not set (per-user count; processes are killed as a group instead)"
    scrub_environment(private_dir, env or {})
    layers["environment"] = "scrubbed"
    os.chdir(private_dir)
    return layers
