"""Evaluation children forked from a warm multiprocessing fork-server, without re-running `__main__`.

Two fork-servers at most per process, one per Triton mode: CPU evaluations need TRITON_INTERPRET=1
set before Triton is imported (Triton's own library kernels are decorated at import), accelerators
need it unset. Each is a `multiprocessing.forkserver.ForkServer` of its own, started on first use.

Stock forkserver children re-import the caller's main module (as `__mp_main__`): a script without
an `if __name__ == "__main__"` guard would run again in every child, and `python -m pytest` would
re-import pytest per evaluation. The harness needs nothing from `__main__`, so the preparation data
sent to the child drops it. The launch is the standard library's own (3.10-3.13); newer Pythons
changed the handshake and are refused.

Python 3.10-3.13's `forkserver.main` ignores the `sys_path` it is handed and swallows an ImportError
of its preload modules. A caller that reaches this package only through `sys.path.insert` (a script
started outside the checkout, a notebook, a Ray worker) would get a fork-server without torch and
the harness preloaded, and children that import them after the tamper snapshot (issue 8, seen #11).
So the fork-server is started with this package's own root on PYTHONPATH, and `preloaded()` lets
the Verifier check in a child that the preload really happened.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import sys
import threading
from multiprocessing import context, forkserver, popen_forkserver, spawn, util
from pathlib import Path

PRELOAD = ["drkernel.verify.process.preload"]
PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])  # the directory that holds drkernel/
_SERVERS: dict[bool, forkserver.ForkServer] = {}
_SERVERS_LOCK = threading.Lock()

_MAIN_KEYS = ("init_main_from_path", "init_main_from_name")


def server(interpret: bool) -> forkserver.ForkServer:
    """The fork-server for one Triton mode (created here, started by its first child)."""
    with _SERVERS_LOCK:
        if interpret not in _SERVERS:
            srv = _Server(interpret)
            srv.set_forkserver_preload((["drkernel.verify.process.interpreter_env"] if interpret else []) + PRELOAD)
            _SERVERS[interpret] = srv
        return _SERVERS[interpret]


class _Server(forkserver.ForkServer):
    """A fork-server whose interpreter finds this package whatever the caller's cwd and sys.path, in its own
    Triton mode whatever the caller's environment: a TRITON_INTERPRET=1 left in the caller's shell (or set by
    a CPU evaluation's import in the same process) would otherwise run GPU candidates in the interpreter."""

    def __init__(self, interpret: bool) -> None:
        super().__init__()
        self.interpret = interpret

    def ensure_running(self) -> None:
        with _ENV_LOCK:
            saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "TRITON_INTERPRET")}
            parts = [PACKAGE_ROOT] + [p for p in (saved["PYTHONPATH"] or "").split(os.pathsep) if p != PACKAGE_ROOT]
            os.environ["PYTHONPATH"] = os.pathsep.join(p for p in parts if p)
            if self.interpret:
                os.environ["TRITON_INTERPRET"] = "1"
            else:
                os.environ.pop("TRITON_INTERPRET", None)
            try:
                super().ensure_running()
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v


_ENV_LOCK = threading.Lock()


class _Popen(popen_forkserver.Popen):
    def _launch(self, process_obj: multiprocessing.process.BaseProcess) -> None:
        srv = server(bool(getattr(process_obj, "interpret", False)))
        if sys.version_info >= (3, 14):
            raise RuntimeError("drkernel's fork-server launch supports Python 3.10-3.13")
        prep_data = {k: v for k, v in spawn.get_preparation_data(process_obj._name).items() if k not in _MAIN_KEYS}
        buf = io.BytesIO()
        context.set_spawning_popen(self)
        try:
            context.reduction.dump(prep_data, buf)
            context.reduction.dump(process_obj, buf)
        finally:
            context.set_spawning_popen(None)
        self.sentinel, w = srv.connect_to_new_process(self._fds)
        _parent_w = os.dup(w)
        self.finalizer = util.Finalize(self, util.close_fds, (_parent_w, self.sentinel))
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)
        return None


class ChildProcess(context.ForkServerProcess):
    """A fork-server child that does not import the caller's `__main__`; `interpret` picks the server."""

    def __init__(self, *args: object, interpret: bool = False, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.interpret = interpret

    @staticmethod
    def _Popen(process_obj: multiprocessing.process.BaseProcess) -> _Popen:
        return _Popen(process_obj)
