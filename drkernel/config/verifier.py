"""Options of one evaluation: what the CLI flags, the HTTP `options` field and the trainer set."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from drkernel.config.base import StrictModel

DeviceName = Literal["auto", "cpu", "cuda", "npu"]


class VerifyOptions(StrictModel):
    """Everything that changes a verdict; part of the cache key of a result (the reward is not: see
    rl.rewards.score)."""

    device: DeviceName = Field("auto", description="where to run: auto picks cuda, then npu, then cpu")
    entry_point: str = Field("Model", description="reference class name; the candidate defines <name>New")
    atol: float = Field(1e-2, ge=0, description="absolute tolerance of the correctness check")
    rtol: float = Field(1e-2, ge=0, description="relative tolerance of the correctness check")
    correctness: Literal["strict", "kernelbench"] = Field(
        "strict", description="strict: KernelBench's allclose AND relative L2 error <= rtol; kernelbench: allclose only"
    )
    num_correct_trials: int = Field(5, ge=1, le=20, description="seeds of the correctness check")
    num_perf_trials: int = Field(
        30, ge=1, le=1000, description="most timed rounds of each model (median reported); 5 on CPU when left unset"
    )
    min_perf_trials: int = Field(10, ge=1, le=1000, description="timed rounds before timing_precision may end timing")
    timing_precision: float = Field(
        0.01,
        ge=0,
        le=1,
        description="end timing once the 95% interval of the median candidate/reference round ratio is within "
        "this share of it (drkernel.verify.judging.precision); 0: always num_perf_trials rounds",
    )
    timing_budget_s: float = Field(
        0.25,
        ge=0,
        le=600,
        description="once timing's rounds took this long, timing_precision is relaxed threefold; 0: never",
    )
    num_warmup: int = Field(
        3, ge=0, le=100, description="untimed calls of each model before timing; 1 on CPU when left unset"
    )
    timeout_s: float = Field(180.0, gt=0, le=3600, description="wall-clock limit of one evaluation")
    require_triton: bool = Field(True, description="demand @triton.jit kernels that launch; off for sanity runs")
    measure_performance: bool = Field(True, description="time reference and candidate after correctness")
    measure_coverage: bool = Field(True, description="profile the candidate to get Triton time coverage")
    memory_limit_mb: int = Field(
        16384, ge=256, le=65536, description="address-space rlimit of the candidate process (CPU), 256 MB to 64 GB"
    )
    output_limit_bytes: int = Field(
        65536, ge=1024, le=1_048_576, description="cap of captured candidate stdout/stderr, 1 KB to 1 MB"
    )
    timing: Literal["measured", "cpu_model"] = Field(
        "measured",
        description="measured: time both models; cpu_model (CPU only): replay the candidate's reported "
        "forward under counting and price it on gpu_profile (drkernel.perfmodel), a proxy for GPU speed",
    )
    gpu_profile: Literal["h200", "a100", "ascend910b"] = Field("h200", description="GPU the cpu_model prices work on")

    def device_refusal(self, owned: str) -> str | None:
        """Why these options cannot run on a verifier that owns `owned` devices; None when they can (`auto` fits
        any). The core, the Serve replica and the HTTP ingress all refuse with this one rule."""
        if self.device in ("auto", owned):
            return None
        return f"options.device={self.device!r}, but this verifier runs on {owned!r}; use 'auto' or {owned!r}"
