"""The typed verdict of one evaluation, shared by the CLI, the Serve app and the trainer.

A verdict carries no reward: what a verdict is worth is the caller's choice, priced by
`drkernel.rl.rewards.score` where a reward is shown (the episode, the verifier's HTTP front, `drkernel verify`),
so one verdict (a cached one too) serves every reward setting.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

ErrorKind = Literal[
    "usage",  # bad input to the verifier itself (not a candidate fault)
    "syntax",  # candidate source does not parse
    "forbidden",  # AST gate rejected the source
    "no_triton",  # no @triton.jit kernel while Triton is required
    "import",  # importing the candidate module failed
    "missing_model_new",  # the module defines no <entry_point>New
    "init",  # constructing ModelNew failed
    "triton_compile",  # a Triton kernel failed to compile
    "runtime",  # forward raised
    "output_mismatch",  # shape, dtype, device, NaN/Inf or value mismatch, an output that cannot be compared
    "protocol",  # the candidate's process sent a malformed message (only a tampered harness does)
    "timeout",  # the evaluation ran past its limit
    "crash",  # the candidate process died with a signal
    "reference",  # the reference itself failed (infra)
    "infra",  # the verifier failed (infra)
]

HackName = Literal[
    "forbidden_api",  # the static gate found an escape or tampering attempt in the source
    "harness_tampering",  # harness callables replaced, a malformed message, or evidence that contradicts itself
    "result_caching",  # an output went wrong after correctness passed: it behaves only when watched
    "input_mutation",  # forward changed its inputs
    "output_aliases_input",  # an output shares storage with an input (and the reference's does not)
    "side_process",  # processes started by the candidate outlived its forward
    "decoy_kernel",  # forwards with no launch of the candidate's own Triton kernels
    "side_stream",  # candidate kernels launched off the harness stream
]

CheckName = Literal[
    "static_gate",  # AST gate over the source
    "load",  # import and construction
    "correctness",  # every correctness trial passed
    "correctness_elementwise",  # KernelBench allclose(atol, rtol)
    "correctness_scale",  # relative L2 error (strict mode)
    "input_mutation",  # inputs unchanged by forward
    "protocol",  # every message from the candidate's process was well formed
    "output_aliasing",  # no output shares storage with an input
    "harness_integrity",  # harness callables intact, evidence consistent
    "side_processes",  # no process outlived a forward
    "triton_launches",  # every forward launched the candidate's own Triton kernels
    "launch_streams",  # kernels ran on the harness stream (accelerators)
    "timing",  # timed rounds completed
    "every_call_checked",  # every call's output compared, timed and re-validation calls included
    "coverage_crosscheck",  # the claimed kernel time fits the judge's own timing
    "coverage",  # coverage measured
    "cpu_model_replay",  # timing cpu_model: the reported trace, replayed on unseen inputs, equals the reference
]


class ErrorInfo(BaseModel):
    """Why a candidate did not pass (or why the verifier could not decide)."""

    kind: ErrorKind
    message: str


class CheckRecord(BaseModel):
    """One named check and what it found."""

    name: CheckName
    passed: bool
    detail: str = ""


class VerifyResult(BaseModel):
    """The verdict; `status == "infra_error"` means no verdict and the sample must be masked."""

    status: Literal["ok", "infra_error"] = "ok"
    compiled: bool = False
    correct: bool = False
    hack: HackName | None = Field(None, description="null, or the name of the reward-hack category caught")
    runtime_ms: float | None = None
    ref_runtime_ms: float | None = None
    speedup: float | None = None
    coverage: float | None = Field(None, description="device time in candidate Triton kernels / all kernels")
    error: ErrorInfo | None = None
    device: str = "cpu"
    timing_source: str | None = Field(None, description="how times were taken, e.g. host_roundtrip_cuda")
    checks: list[CheckRecord] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)
    elapsed_s: float = 0.0

    @classmethod
    def infra(
        cls, kind: ErrorKind, message: str, device: str, elapsed_s: float = 0.0, details: dict[str, Any] | None = None
    ) -> VerifyResult:
        """No verdict (the verifier, the reference or the service failed): masked by the trainer, never a reward."""
        return cls(
            status="infra_error",
            error=ErrorInfo(kind=kind, message=message),
            device=device,
            details=details or {},
            elapsed_s=elapsed_s,
        )
