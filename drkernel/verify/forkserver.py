"""Evaluation children forked from multiprocessing's fork-server, without re-running `__main__`.

Stock forkserver children re-import the caller's main module (as `__mp_main__`): a script without
an `if __name__ == "__main__"` guard would run again in every child, and `python -m pytest` would
re-import pytest per evaluation. The harness needs nothing from `__main__`, so the preparation data
sent to the child drops it. The launch is the standard library's own (3.10-3.13); newer Pythons
changed the handshake and use the stock path.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import sys
from multiprocessing import context, forkserver, popen_forkserver, spawn, util

_MAIN_KEYS = ("init_main_from_path", "init_main_from_name")


class _Popen(popen_forkserver.Popen):
    def _launch(self, process_obj: multiprocessing.process.BaseProcess) -> None:
        if sys.version_info >= (3, 14):
            return super()._launch(process_obj)
        prep_data = {k: v for k, v in spawn.get_preparation_data(process_obj._name).items() if k not in _MAIN_KEYS}
        buf = io.BytesIO()
        context.set_spawning_popen(self)
        try:
            context.reduction.dump(prep_data, buf)
            context.reduction.dump(process_obj, buf)
        finally:
            context.set_spawning_popen(None)
        self.sentinel, w = forkserver.connect_to_new_process(self._fds)
        _parent_w = os.dup(w)
        self.finalizer = util.Finalize(self, util.close_fds, (_parent_w, self.sentinel))
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)
        return None


class ChildProcess(context.ForkServerProcess):
    """A fork-server child that does not import the caller's `__main__`."""

    @staticmethod
    def _Popen(process_obj: multiprocessing.process.BaseProcess) -> _Popen:
        return _Popen(process_obj)
