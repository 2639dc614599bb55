"""The typed verdict of one evaluation, shared by the CLI, the Serve app and the trainer."""

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


class ErrorInfo(BaseModel):
    """Why a candidate did not pass (or why the verifier could not decide)."""

    kind: ErrorKind
    message: str


class CheckRecord(BaseModel):
    """One named check and what it found."""

    name: str
    passed: bool
    detail: str = ""


class VerifyResult(BaseModel):
    """The verdict; `status == "infra_error"` means no verdict and the sample must be masked."""

    status: Literal["ok", "infra_error"] = "ok"
    compiled: bool = False
    correct: bool = False
    hack: str | None = Field(None, description="null, or the name of the reward-hack category caught")
    runtime_ms: float | None = None
    ref_runtime_ms: float | None = None
    speedup: float | None = None
    coverage: float | None = Field(None, description="device time in candidate Triton kernels / all kernels")
    reward: float = 0.0
    error: ErrorInfo | None = None
    device: str = "cpu"
    timing_source: str | None = Field(None, description="how times were taken, e.g. host_roundtrip_cuda")
    checks: list[CheckRecord] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)
    elapsed_s: float = 0.0
