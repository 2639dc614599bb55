"""Runtime check that reference sources load: exec each one in a sandboxed child process with torch.

A source passes when exec-ing it defines an `nn.Module` subclass named after the entry point and
callable `get_inputs`/`get_init_inputs`. Neither is called: KernelBench inputs can be gigabytes.

User files are untrusted, so they never run in the caller's process, and the child applies the
verifier's isolation (drkernel.verify.process.sandbox.isolate: own mount and network namespaces with every
mount read-only except a private temp dir, rlimits, a scrubbed environment, its own process group)
after importing torch and before exec-ing the first source. A source that writes to disk on import
gets a read-only file system, one that reaches for the network finds none. The caller kills the
child's whole process group when it is done, so nothing a source started outlives the check. Which
isolation layers were active is returned with the verdicts (the OS may refuse some of them).
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from drkernel.log import Progress

_CHILD = r"""
import json, sys, traceback
spec = json.loads(sys.stdin.readline())
items = [json.loads(line) for line in sys.stdin]  # read all first: a source may touch stdin
import torch.nn as nn
from drkernel.verify.process.sandbox import isolate
layers = isolate(spec["workdir"], on_accelerator=False, memory_limit_mb=spec["memory_limit_mb"], env=spec["env"])
print(json.dumps({"sandbox": layers}), flush=True)
for item in items:
    ns = {"__name__": "reference_under_check"}
    try:
        exec(compile(item["source"], item["key"], "exec"), ns)
        model = ns.get(item["entry_point"])
        problems = []
        if not (isinstance(model, type) and issubclass(model, nn.Module)):
            problems.append(f"{item['entry_point']} is not an nn.Module subclass")
        problems += [f"{f} is not callable" for f in ("get_inputs", "get_init_inputs") if not callable(ns.get(f))]
        error = "; ".join(problems) or None
    except BaseException as e:
        error = " ".join("".join(traceback.format_exception_only(type(e), e)).split())
    print(json.dumps({"key": item["key"], "error": error}), flush=True)
print("\n" + "__drkernel_refcheck_done__", flush=True)
"""
_DONE = "\n__drkernel_refcheck_done__"

# No accelerator and no network: a reference that fetches a model config fails fast, not after retries.
_CHILD_ENV = {"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


class CheckerFailed(RuntimeError):
    """The checking process itself failed (not a verdict on any one source)."""


@dataclass
class LoadCheck:
    """key -> None when the source loads, else the error; and what each sandbox layer did."""

    verdicts: dict[str, str | None] = field(default_factory=dict)
    sandbox: dict[str, str] = field(default_factory=dict)


def check_loadable(
    sources: dict[str, str], entry_point: str = "Model", timeout_s: float = 300.0, memory_limit_mb: int | None = 16384
) -> LoadCheck:
    """Exec every source (keyed by its path) once in one sandboxed child; torch is imported once for all."""
    if not sources:
        return LoadCheck()
    workdir = tempfile.mkdtemp(prefix="drkernel-refcheck-")
    spec = {"workdir": workdir, "memory_limit_mb": memory_limit_mb, "env": _CHILD_ENV}
    payload = (
        json.dumps(spec)
        + "\n"
        + "".join(json.dumps({"key": k, "source": s, "entry_point": entry_point}) + "\n" for k, s in sources.items())
    )
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "PYTHONPATH")}
    env.update(_CHILD_ENV)
    with tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env
        )
        try:
            proc.stdin.write(payload.encode())  # the child reads all of it before it runs anything
            proc.stdin.close()
            with Progress(len(sources), "references load-checked") as bar:
                stdout, finished = _read_until_done(proc, time.monotonic() + timeout_s, bar)
        except BrokenPipeError:
            stdout, finished = "", True
        finally:
            _kill_group(proc)  # a process a source started may still hold stdout open: never wait for it
            proc.wait()
            shutil.rmtree(workdir, ignore_errors=True)
        stderr.seek(0)
        errors = stderr.read()
    if not finished:
        raise CheckerFailed(f"load check timed out after {timeout_s:.0f}s; {_progress(stdout, sources)}")
    check = _parse(stdout)
    if len(check.verdicts) < len(sources):
        raise CheckerFailed(
            f"load check process exited with {proc.returncode}; {_progress(stdout, sources)}; "
            f"stderr: {errors.strip()[-500:]}"
        )
    return check


def _read_until_done(proc: subprocess.Popen, deadline: float, bar: Progress | None = None) -> tuple[str, bool]:
    """Child's stdout up to its 'done' line or EOF; (text, False) when the deadline passes first. `bar` counts
    the verdict lines seen so far (display only: a source could print such a line itself).

    Raw reads on the fd: a buffered reader could hold complete lines that select() no longer reports.
    """
    data = b""
    fd = proc.stdout.fileno()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not selector.select(left):
                continue
            chunk = os.read(fd, 1 << 16)
            data += chunk
            text = data.decode(errors="replace")
            if bar is not None:
                bar.update(max(0, text.count('{"key": ') - bar.done))
            if not chunk or _DONE in text:
                return text.split(_DONE)[0], True
    return data.decode(errors="replace"), False


def _kill_group(proc: subprocess.Popen) -> None:
    """The child made itself a process-group leader (isolate calls setsid): kill all it started, then it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # no group yet (it died before setsid) or already gone
    if proc.poll() is None:
        proc.kill()


def _parse(stdout: str) -> LoadCheck:
    check = LoadCheck()
    for line in stdout.splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue  # a reference printed to stdout at import time
        if isinstance(item, dict) and set(item) == {"key", "error"}:
            check.verdicts[item["key"]] = item["error"]
        elif isinstance(item, dict) and set(item) == {"sandbox"} and not check.sandbox and not check.verdicts:
            check.sandbox = item["sandbox"]  # only the line printed before any source ran is believed
    return check


def _progress(stdout: str, sources: dict[str, str]) -> str:
    """Which source the child was on when it died (the first one without a result)."""
    done = _parse(stdout).verdicts
    pending = [k for k in sources if k not in done]
    return f"{len(done)} of {len(sources)} checked, stopped at {pending[0]}" if pending else "all checked"
