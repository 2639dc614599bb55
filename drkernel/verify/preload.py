"""Imported once by the fork-server, so every evaluation child starts with torch, Triton and the
harness already loaded (a fork costs about 20 ms; a fresh interpreter importing torch, seconds)."""

import torch  # noqa: F401
import torch._dynamo  # noqa: F401  (rebinds torch.manual_seed on import: before any harness snapshot)
import torch.multiprocessing  # noqa: F401  (registers the CUDA IPC reductions on the pickler)
import torch.profiler  # noqa: F401
import triton  # noqa: F401
import triton.language  # noqa: F401
import triton.runtime.interpreter  # noqa: F401

from drkernel.verify import candidate_process, devices, entry, reference_process  # noqa: F401


def probe(conn) -> None:  # type: ignore[no-untyped-def]
    """Child entry: report which devices this host offers (keeps torch out of the caller)."""
    conn.send(devices.probe_availability())
    conn.close()
