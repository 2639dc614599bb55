"""The judge's link to one runner: orders out, pickled (the judge alone writes them), replies in, decoded by
drkernel.verify.process.protocol as hostile input when the runner is the candidate's; and the three ways a judgement
ends early (no verdict possible, a fault of the candidate's, the candidate's process gone)."""

from __future__ import annotations

import glob
import os
from multiprocessing.reduction import ForkingPickler
from typing import Any

from drkernel.types.verify_result import CheckName, HackName
from drkernel.verify.process import protocol
from drkernel.verify.result import Infra


def open_ipc_refcounters(opened: set[str]) -> None:
    """torch keeps a CUDA IPC reference counter per sent tensor in a 0600 shared-memory file of the
    sender (/dev/shm/torch_<pid>_*); a candidate runner with its own uid (sandbox) must open them to map
    our tensors. They hold only counters: a candidate that rewrites them can make this process free a
    block early, and the blocks it ever held come from the private pool. Only this process's files,
    each once (`opened`), and only before orders that carry tensors: never inside a timed round trip."""
    for path in glob.glob(f"/dev/shm/torch_{os.getpid()}_*"):
        if path in opened:
            continue
        try:
            os.chmod(path, 0o666)
            opened.add(path)
        except OSError:
            pass


class CandidateFault(Exception):
    """Decides the verdict against the candidate (optionally naming a hack)."""

    def __init__(
        self, kind: str, message: str, detail: str = "", hack: tuple[HackName, CheckName] | None = None
    ) -> None:
        super().__init__(message)
        self.kind, self.message, self.detail, self.hack = kind, message, detail, hack


class CandidateGone(Exception):
    """The candidate's channel closed: its process died (the caller knows how)."""


class Channel:
    """One runner as the judge sees it: orders out (pickled: the judge alone writes them), replies in
    (decoded by protocol.recv as hostile input when the runner is the candidate's)."""

    def __init__(self, conn: Any, trusted: bool, ipc: bool = False) -> None:
        self.conn, self.trusted, self.ipc = conn, trusted, ipc
        self.evidence: dict[str, Any] = {}
        self.opened: set[str] = set()
        self.digest: str | None = None  # of the last run's outputs, as the runner reported it inside the timing
        self.want_digest = False
        self.calls = 0  # forwards this runner was ordered to observe (its evidence must account for them)
        self.into_bound = False  # CUDA: the last run was ordered with output buffers bound for every call

    def order(self, *message: Any, tensors: bool = False) -> None:
        """Pickled here (the judge alone writes this channel). An order that carries CUDA tensors
        (`tensors`) to the candidate's runner first opens the IPC reference counters its pickling
        created to the runner's uid; "run" carries none, so the timed round trip is the same for
        both runners."""
        data = ForkingPickler.dumps(message)
        if tensors and self.ipc and not self.trusted:
            open_ipc_refcounters(self.opened)
        try:
            self.conn.send_bytes(data)
        except (OSError, EOFError) as e:
            self._gone(e)

    def _gone(self, e: BaseException) -> None:
        if self.trusted:  # killed from outside (OOM killer, operator): no verdict on the reference, an infra error
            raise Infra("infra", f"reference runner went away: {type(e).__name__}")
        raise CandidateGone() from e

    def reply(self, expect: str, max_payload: int = 0, precheck: Any = None) -> tuple[dict[str, Any], bytes]:
        try:
            header, payload = protocol.recv(
                self.conn,
                max_payload,
                None if precheck is None else (lambda h: precheck(h) if h["type"] == expect else None),
            )
        except (EOFError, ConnectionError) as e:
            self._gone(e)
        except protocol.ProtocolError as e:
            if self.trusted:
                raise Infra("reference", f"reference runner broke the protocol: {e}") from e
            raise CandidateFault(
                "protocol",
                f"the candidate's process sent a malformed message: {e}",
                hack=("harness_tampering", "protocol"),
            ) from e
        kind = header["type"]
        if kind == "fault":
            if self.trusted:
                raise Infra("reference", f"reference failed during {header['phase']}: {header['message']}")
            raise CandidateFault(header["kind"], header["message"], header["detail"])
        if kind != expect:
            if self.trusted:
                raise Infra("reference", f"reference runner answered {kind!r}, expected {expect!r}")
            raise CandidateFault(
                "protocol",
                f"the candidate's process answered {kind!r} where {expect!r} was due",
                hack=("harness_tampering", "protocol"),
            )
        return header, payload
