"""A spare evaluation child: forked, sandboxed and with its device initialised before its evaluation exists.

The Verifier keeps a few of these ready (group.Group) so an evaluation does not wait for forks, the
sandbox and (on a GPU) a CUDA context per child. A spare has loaded no reference and no candidate code:
it applies its role's sandbox in its own private folder (still empty), initialises the device, then waits
for the one message that turns it into that role's child of one evaluation, the ChildSpec pickled by the
trusted caller. It serves that one evaluation and is killed with it; an unused spare is killed at close.
"""

from __future__ import annotations

import importlib
from typing import Any


def main(
    module: str,
    device: str,
    workdir: str,
    memory_limit_mb: int,
    group_uid: int | None,
    warm: bool,
    start: Any,
    *ends: Any,
) -> None:
    """Entry point of a spare of role `module` (judge, reference_process, candidate_process or replay); `warm`
    (a spare made ahead of need) also runs the role's warm_up: library handles, the judge's comparison kernel."""
    role = importlib.import_module(module)
    try:
        role.prepare(device, workdir, memory_limit_mb, group_uid)
        from drkernel.verify.judging.backends import make_backend

        backend = make_backend(device)
        backend.synchronize()  # the device's context, made now rather than in the evaluation
        if warm and hasattr(role, "warm_up"):
            role.warm_up(backend)
    except Exception:
        pass  # the role's own prepare() in main() meets the failure again and reports it to the judge or caller
    try:
        spec = start.recv()  # the trusted caller's ChildSpec: the only pickle this process reads
    except (EOFError, OSError):
        return  # discarded unused
    start.close()
    if (spec.device, spec.workdir, spec.memory_limit_mb, spec.group_uid) != (
        device,
        workdir,
        memory_limit_mb,
        group_uid,
    ):
        raise RuntimeError("a spare was handed a spec for another sandbox")
    role.main(spec, *ends)
