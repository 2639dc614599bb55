"""The one message the trusted caller hands each child of an evaluation when it starts it (judge, reference
runner, candidate runner, replay): frozen and typed, so a child reads fields, never keys of a dict. It travels
the trusted-to-child direction only (pickled by the caller, which alone writes it); nothing a child sends back
is unpickled (drkernel.verify.process.protocol)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from drkernel.config.verifier import VerifyOptions

CPU_PERF_TRIALS = 5  # CPU default when the caller left num_perf_trials unset: interpreter times are logic-level
CPU_WARMUP = 1


@dataclass(frozen=True)
class ChildSpec:
    """What one evaluation child is told: where to work, which files to load, what the caller asked for."""

    device: str  # "cpu" | "cuda" | "npu": the device this verifier resolved to
    workdir: str  # the child's own folder (its sandbox root; stdout/stderr land here)
    entry_point: str  # reference class name; the candidate defines <entry_point>New
    candidate_path: str  # the candidate's source in this child's folder
    reference_path: str  # the reference's source in this child's folder
    require_triton: bool  # demand the candidate's own Triton launches
    num_perf_trials: int  # timed rounds (the CPU default already applied)
    num_warmup: int  # warm-up calls (the CPU default already applied)
    memory_limit_mb: int  # address-space limit of a sandboxed child on CPU
    gate_kernels: tuple[str, ...]  # the @triton.jit functions the static gate found
    options: VerifyOptions  # everything else the caller asked for, as validated
    group_uid: int | None = None  # accelerators: the one uid all children of this evaluation drop to (CUDA IPC)


def child_spec(device: str, options: VerifyOptions, workdir: str, kernels: list[str]) -> ChildSpec:
    """The spec of a child working in `workdir` (where the caller wrote reference.py, and candidate.py for the
    children that load it), with the CPU's trial counts where the caller left them unset."""
    perf_trials, warmup = options.num_perf_trials, options.num_warmup
    if device == "cpu":
        if "num_perf_trials" not in options.model_fields_set:
            perf_trials = CPU_PERF_TRIALS
        if "num_warmup" not in options.model_fields_set:
            warmup = CPU_WARMUP
    return ChildSpec(
        device=device,
        workdir=workdir,
        entry_point=options.entry_point,
        candidate_path=os.path.join(workdir, "candidate.py"),
        reference_path=os.path.join(workdir, "reference.py"),
        require_triton=options.require_triton,
        num_perf_trials=perf_trials,
        num_warmup=warmup,
        memory_limit_mb=options.memory_limit_mb,
        gate_kernels=tuple(kernels),
        options=options.model_copy(),
    )
