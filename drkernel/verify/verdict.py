"""The verdict under construction: built by the judge, finished by the caller. Torch-free (the caller's
process never imports torch), and plain JSON on the wire between the two."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from drkernel.types.verify_result import CheckName, CheckRecord, ErrorInfo, HackName, VerifyResult

TIMING_SOURCE = {"cpu": "cpu_wall_roundtrip", "cuda": "host_roundtrip_cuda", "npu": "host_roundtrip_npu"}


@dataclass
class Verdict:
    device: str = "cpu"
    compiled: bool = False
    loaded: bool = False
    correct: bool = False
    error: dict[str, str] | None = None
    hacks: list[HackName] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    cand_ms: float | None = None
    ref_ms: float | None = None
    coverage: float | None = None
    phase_s: dict[str, float] = field(default_factory=dict)
    timing_source: str | None = None  # set when the times are not measured (cpu_model)

    def check(self, name: CheckName, passed: bool, detail: str = "") -> None:
        self.checks.append({"name": name, "passed": passed, "detail": detail})

    def hack(self, name: HackName, check: CheckName, detail: str, first: bool = False) -> None:
        """Record a hack; `first` when it names the cause better than evidence recorded before it
        (a replayed output also skips its launches: caching, not decoy)."""
        if name in self.hacks:
            self.hacks.remove(name)
        self.hacks.insert(0, name) if first else self.hacks.append(name)
        self.check(check, False, detail)

    def fail(self, kind: str, message: str) -> None:
        if self.error is None:
            self.error = {"kind": kind, "message": message}

    def failed(self, check: CheckName) -> bool:
        return any(c["name"] == check and not c["passed"] for c in self.checks)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Verdict:
        return cls(**data)

    def result(self, t0: float) -> VerifyResult:
        """The typed verdict (unpriced: callers that show a reward price it with drkernel.rl.rewards.score)."""
        correct = self.correct and self.error is None
        timed = correct and self.cand_ms is not None and self.ref_ms is not None
        runtime = self.cand_ms if timed else None
        ref_runtime = self.ref_ms if timed else None
        speedup = ref_runtime / runtime if runtime and ref_runtime and runtime > 0 else None
        coverage = self.coverage if correct else None
        hack = self.hacks[0] if self.hacks else None
        details = dict(self.details)
        if len(self.hacks) > 1:
            details["all_hacks"] = self.hacks
        details["phase_s"] = {k: round(v, 4) for k, v in self.phase_s.items()}
        if self.device == "cpu" and runtime is not None:
            details["timing_note"] = (
                "CPU Triton interpreter: times are wall-clock round trips and the timing-based "
                "checks are logic-level only"
            )
        return VerifyResult(
            status="ok",
            compiled=self.compiled,
            correct=correct,
            hack=hack,
            runtime_ms=runtime,
            ref_runtime_ms=ref_runtime,
            speedup=speedup,
            coverage=coverage,
            error=ErrorInfo(**self.error) if self.error else None,  # type: ignore[arg-type]
            device=self.device,
            timing_source=(self.timing_source or TIMING_SOURCE[self.device]) if runtime is not None else None,
            checks=[CheckRecord(**c) for c in self.checks],
            details=details,
            elapsed_s=time.perf_counter() - t0,
        )
