"""Imported once by the fork-server, so every evaluation child starts with torch, Triton and the
harness already loaded (a fork costs about 20 ms; a fresh interpreter importing torch, seconds)."""

import os

# Triton fixed its mode (interpreter or compiler) when it was imported just below: record which one.
TRITON_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

import torch
import torch._dynamo  # rebinds torch.manual_seed on import: before any harness snapshot
import torch.multiprocessing  # registers the CUDA IPC reductions on the pickler
import torch.profiler
import triton
import triton.language
import triton.runtime.interpreter

from drkernel import devices
from drkernel.verify.harness import candidate_process, gpu_dot, reference_process
from drkernel.verify.judging import judge
from drkernel.verify.process import entry

if TRITON_INTERPRET:  # every child's tl.dot on fp32 with the GPU's TF32 operands, before any harness snapshot
    gpu_dot.install()

# The pid of the process that imported this module: in a fork-server child it differs from the
# child's own pid only when the fork-server really preloaded it (it swallows a failed preload).
IMPORTED_IN = os.getpid()


def preloaded() -> bool:
    """True in a fork-server child whose server imported this module before forking it."""
    return IMPORTED_IN != os.getpid()


def probe(conn) -> None:  # type: ignore[no-untyped-def]
    """Child entry: which devices this host offers and whether the preload happened (keeps torch out
    of the caller). Answers in JSON: nothing a child sends is unpickled."""
    import json

    conn.send_bytes(
        json.dumps(
            {
                "devices": devices.probe_availability(),
                "memory": devices.accelerator_memory(),
                "preloaded": preloaded(),
                "triton_interpret": TRITON_INTERPRET,
                "server_pid": IMPORTED_IN,
            }
        ).encode()
    )
    conn.close()
