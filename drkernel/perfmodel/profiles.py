"""GPU profiles the cost model prices counted work on: typed data, each number with where it comes from.

Only the H200's DRAM copy bandwidth and bf16 matrix rate were measured on a lent H200
(/work/.library/device/KINDS.md); the rest are vendor datasheet figures or labelled estimates.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuProfile:
    """Peak rates of one device; `sources` says where each figure comes from."""

    name: str
    dram_bytes_per_s: float  # achievable HBM bandwidth (reads + writes)
    l2_bytes_per_s: float  # bandwidth of re-reads served from the last-level cache
    l1_bytes_per_s: float  # aggregate L1 / shared-memory bandwidth: a program re-reading what it loaded
    fp32_flops: float  # plain FP32 (CUDA cores): eager PyTorch fp32 matmuls (TF32 off by default)
    tf32_flops: float  # tensor-core TF32: tl.dot on fp32 operands (input_precision="tf32", Triton's default)
    bf16_flops: float  # tensor-core fp16/bf16 (dense)
    fp64_flops: float  # FP64 matrix rate: tl.dot on fp64 operands, eager fp64 / complex128 matmuls
    launch_overhead_s: float  # host-side cost of one kernel launch
    compute_units: int  # SMs (AI cores on Ascend): a grid of fewer programs leaves the rest idle
    sector_bytes: int  # the unit memory moves in between DRAM, L2 and the cores: a partly used sector costs whole
    sources: dict[str, str] = field(default_factory=dict)

    def peak_flops(self, precision: str) -> float:
        return {
            "fp32": self.fp32_flops,
            "tf32": self.tf32_flops,
            "bf16": self.bf16_flops,
            "tf32x3": self.tf32_flops / 3,
            "fp64": self.fp64_flops,
            "vector": self.fp32_flops,
        }.get(precision, self.fp32_flops)


H200 = GpuProfile(
    name="h200",
    dram_bytes_per_s=4.3e12,
    l2_bytes_per_s=10e12,
    l1_bytes_per_s=33e12,
    fp32_flops=67e12,
    tf32_flops=495e12,
    bf16_flops=788e12,
    fp64_flops=67e12,
    launch_overhead_s=4e-6,
    compute_units=132,
    sector_bytes=32,
    sources={
        "dram_bytes_per_s": "measured: device-to-device copy through PyTorch, about 4.3 TB/s (KINDS.md, 2026-10-28 "
        "and 2026-11-04; datasheet 4.8 TB/s); 19_ReLU ran at 4.2 TB/s (h200_measurements.md)",
        "l2_bytes_per_s": "estimate, not measured here: about 2.3x HBM, as published microbenchmarks put Hopper's L2",
        "l1_bytes_per_s": "estimate: 132 SMs x 128 B/clock x 1.98 GHz (SM count and clock read on the lent H200)",
        "fp32_flops": "datasheet (H200 SXM = H100 SXM arithmetic): 67 TFLOP/s",
        "tf32_flops": "datasheet dense TF32 (989 with sparsity): 495 TFLOP/s",
        "bf16_flops": "measured: 8192^3 bf16 matmul through PyTorch, 769-798 TFLOP/s on random data (KINDS.md)",
        "fp64_flops": "datasheet (H200 SXM = H100 SXM): FP64 tensor core 67 TFLOP/s",
        "launch_overhead_s": "estimate: a few microseconds per launch from Python (eager aten or Triton's launcher)",
        "compute_units": "read on the lent H200 (torch.cuda.get_device_properties: 132 SMs)",
        "sector_bytes": "CUDA C++ Best Practices Guide, coalesced access: global memory moves in 32-byte sectors",
    },
)

A100 = GpuProfile(
    name="a100",
    dram_bytes_per_s=1.8e12,
    l2_bytes_per_s=4.5e12,
    l1_bytes_per_s=19e12,
    fp32_flops=19.5e12,
    tf32_flops=156e12,
    bf16_flops=312e12,
    fp64_flops=19.5e12,
    launch_overhead_s=4e-6,
    compute_units=108,
    sector_bytes=32,
    sources={
        "dram_bytes_per_s": "datasheet A100 80GB SXM 2.04 TB/s, derated to about 88% achievable",
        "l2_bytes_per_s": "estimate: about 2.5x HBM",
        "l1_bytes_per_s": "estimate: 108 SMs x 128 B/clock x 1.41 GHz",
        "fp32_flops": "datasheet: 19.5 TFLOP/s",
        "tf32_flops": "datasheet dense: 156 TFLOP/s",
        "bf16_flops": "datasheet dense: 312 TFLOP/s",
        "fp64_flops": "datasheet: FP64 tensor core 19.5 TFLOP/s",
        "launch_overhead_s": "estimate, as for the H200",
        "compute_units": "datasheet: 108 SMs",
        "sector_bytes": "CUDA C++ Best Practices Guide: 32-byte sectors (Ampere and later)",
    },
)

ASCEND_910B = GpuProfile(
    name="ascend910b",
    dram_bytes_per_s=1.4e12,
    l2_bytes_per_s=3.5e12,
    l1_bytes_per_s=10e12,
    fp32_flops=40e12,
    tf32_flops=160e12,
    bf16_flops=313e12,
    fp64_flops=40e12,
    launch_overhead_s=8e-6,
    compute_units=24,
    sector_bytes=32,
    sources={
        "dram_bytes_per_s": "vendor figure 1.6 TB/s HBM2e, derated to about 88% achievable (lead, unverified)",
        "l2_bytes_per_s": "estimate: about 2.5x HBM",
        "l1_bytes_per_s": "estimate, unverified (on-chip buffers of the AI cores)",
        "fp32_flops": "estimate (vector units), unverified",
        "tf32_flops": "estimate (hf32 on the cube unit)",
        "bf16_flops": "vendor figure for 910B3: about 313 TFLOP/s fp16/bf16 (unverified)",
        "fp64_flops": "estimate, unverified: no figure found (the cube unit has no fp64); the fp32 vector rate assumed",
        "launch_overhead_s": "estimate: task launch through torch_npu is slower than CUDA",
        "compute_units": "estimate: 910B variants report 20-25 AI cores; 24 assumed (unverified)",
        "sector_bytes": "estimate, unverified: Ascend C moves data in 32-byte aligned blocks (the unified buffer)",
    },
)

PROFILES: dict[str, GpuProfile] = {p.name: p for p in (H200, A100, ASCEND_910B)}


def get_profile(name: str) -> GpuProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown GPU profile {name!r}; known: {', '.join(PROFILES)}") from None
