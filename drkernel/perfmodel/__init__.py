"""A roofline model of GPU time from counted work, for CPU-only evaluation (issue 13).

On a CPU the Triton interpreter runs kernels thousands of times slower than torch, so wall-clock
speedups say nothing about a kernel. Instead the bytes and flops each launch really moves (counted
while the interpreter executes it, or from the aten operator's tensors) are priced on a named GPU
profile. It is a proxy: BENCHMARKS.md and the README say where it is wrong.
"""

from drkernel.perfmodel.cost import LaunchCount, ModelledTime, launch_seconds, model_time
from drkernel.perfmodel.profiles import PROFILES, GpuProfile, get_profile

__all__ = ["PROFILES", "GpuProfile", "LaunchCount", "ModelledTime", "get_profile", "launch_seconds", "model_time"]
