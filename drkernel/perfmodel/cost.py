"""The per-launch roofline: max(unique DRAM bytes / bandwidth + re-read bytes / L2 bandwidth (+ a program's
re-reads of its own data / L1 bandwidth), tensor-core flops / peak, CUDA-core ops / peak) + launch overhead,
summed over launches. Tensor cores and CUDA cores are separate pipes that overlap, hence the max. Arithmetic
happens on the SMs a grid occupies: a Triton launch of fewer programs than the device has SMs gets that fraction
of the peak rates (red-team finding: one program looping over a whole matmul was priced at full-device rates).
Memory is not scaled so: one SM can draw well over its share of DRAM bandwidth, and an eager operator's grid is
not known."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from drkernel.perfmodel.profiles import GpuProfile

SECTOR_BYTES = 32  # the memory transaction size counts default to (NVIDIA: 32 B sectors; GpuProfile.sector_bytes)


@dataclass
class LaunchCount:
    """Work one launch did, as counted (never as claimed): a Triton launch under the interpreter, or one
    eager aten operator."""

    name: str
    kind: str  # "triton" | "aten"
    read_bytes: int = 0  # unique bytes read (each address once): DRAM traffic
    write_bytes: int = 0  # unique bytes written
    reread_bytes: int = 0  # loads of an address another program of this launch loaded before: served by the L2
    flops: dict[str, float] = field(default_factory=dict)  # flops per precision (profile.peak_flops keys)
    local_reread_bytes: int = 0  # loads of an address the same program loaded before: L1 / shared memory
    programs: int | None = None  # programs of a Triton grid; None = an eager operator, assumed to fill the device

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def launch_seconds(c: LaunchCount, profile: GpuProfile) -> float:
    memory = (
        (c.read_bytes + c.write_bytes) / profile.dram_bytes_per_s
        + c.reread_bytes / profile.l2_bytes_per_s
        + c.local_reread_bytes / profile.l1_bytes_per_s
    )
    occupancy = min(1.0, c.programs / profile.compute_units) if c.programs else 1.0
    vector = c.flops.get("vector", 0.0) / profile.peak_flops("vector") / occupancy
    tensor = sum(f / profile.peak_flops(p) for p, f in c.flops.items() if p != "vector") / occupancy
    return max(memory, tensor, vector) + profile.launch_overhead_s


@dataclass
class ModelledTime:
    seconds: float
    launches: int
    read_bytes: int
    write_bytes: int
    reread_bytes: int
    flops: float
    kernel_seconds: float = 0.0  # device time: seconds less the launch overheads
    triton_seconds: float = 0.0  # device time of the Triton launches
    triton_launches: int = 0  # of `launches`, those of Triton kernels (none: a traced forward that launched nothing)

    @property
    def triton_share(self) -> float | None:
        """Coverage as a GPU profiler would measure it: the Triton launches' share of device time (issue 27: on CPU
        the interpreter's share of wall time is near 1.0 for any Triton launch, however little it does)."""
        return self.triton_seconds / self.kernel_seconds if self.kernel_seconds > 0 else None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def model_time(counts: list[LaunchCount], profile: GpuProfile) -> ModelledTime:
    device = [launch_seconds(c, profile) - profile.launch_overhead_s for c in counts]
    return ModelledTime(
        seconds=sum(launch_seconds(c, profile) for c in counts),
        launches=len(counts),
        read_bytes=sum(c.read_bytes for c in counts),
        write_bytes=sum(c.write_bytes for c in counts),
        reread_bytes=sum(c.reread_bytes for c in counts),
        flops=sum(sum(c.flops.values()) for c in counts),
        kernel_seconds=sum(device),
        triton_seconds=sum(t for t, c in zip(device, counts) if c.kind == "triton"),
        triton_launches=sum(c.kind == "triton" for c in counts),
    )
