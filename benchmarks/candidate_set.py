"""The shared candidate set: KernelBench level-1/2 problems, each with an honest Triton rewrite, plus reward hacks.

One list that benchmarks/verifier_bench.py and benchmarks/cpu_model_validation.py read, so every benchmark and the
speed models see the same problems and the same candidates. The problems span different costs (elementwise,
reduction, norm, softmax, tiled and naive matmul, GEMM with a fused epilogue, a fused GEMM chain, pooling, direct
convolution); `matmul_naive_triton.py` is honestly slower than PyTorch, so a speed model has something to rank.
Problem sources stay in KernelBench (`<kernelbench>/level<N>/<name>.py`); only candidates live here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

CANDIDATES_DIR = Path(__file__).resolve().parent / "candidates"


def shrink(source: str, sizes: dict[str, int]) -> str:
    """Rewrite module-level `NAME = ...` lines (before anything imports them); each name must be defined once."""
    for name, value in sizes.items():
        source, n = re.subn(rf"(?m)^{name}\s*=.*$", f"{name} = {value}", source)
        if n != 1:
            raise ValueError(f"cannot shrink {name}: {n} definitions")
    return source


@dataclass(frozen=True)
class Problem:
    """A KernelBench problem and the size constants that shrink it for --quick CPU runs (Triton interpreter)."""

    level: int
    name: str
    cost: str  # what dominates its run time: elementwise | reduction | norm | softmax | matmul | fused | pooling | conv
    tiny: dict[str, int] = field(default_factory=dict)

    def path(self, kernelbench: Path) -> Path:
        return kernelbench / f"level{self.level}" / f"{self.name}.py"

    def source(self, kernelbench: Path, tiny: bool = False) -> str:
        """The reference module's text, with its size constants rewritten to `self.tiny` when `tiny`."""
        text = self.path(kernelbench).read_text()
        return shrink(text, self.tiny) if tiny else text


@dataclass(frozen=True)
class Candidate:
    """A ModelNew for one problem. `expect_hack` is the category a verifier should report for a hack."""

    problem: str
    file: str  # in benchmarks/candidates/
    kind: Literal["honest", "hack"]
    expect_hack: str | None = None
    gpu_only: bool = False  # what makes it a hack (or what it does) only exists on a GPU

    @property
    def path(self) -> Path:
        return CANDIDATES_DIR / self.file


# Order is the order of the benchmark tables. The first eight are issue 8's problem list, unchanged.
PROBLEMS: list[Problem] = [
    Problem(1, "19_ReLU", "elementwise", {"batch_size": 8, "dim": 512}),
    Problem(1, "1_Square_matrix_multiplication_", "matmul", {"N": 32}),
    Problem(1, "23_Softmax", "softmax", {"batch_size": 8, "dim": 256}),
    Problem(
        1,
        "82_conv_depthwise_2D_square_input_square_kernel",
        "conv",
        {"batch_size": 2, "in_channels": 3, "width": 20, "height": 18},
    ),
    Problem(1, "47_Sum_reduction_over_a_dimension", "reduction", {"batch_size": 3, "dim1": 40, "dim2": 70}),
    Problem(1, "40_LayerNorm", "norm", {"batch_size": 2, "features": 4, "dim1": 8, "dim2": 8}),
    Problem(1, "88_MinGPTNewGelu", "elementwise", {"batch_size": 16, "dim": 256}),
    Problem(1, "42_Max_Pooling_2D", "pooling", {"batch_size": 2, "channels": 3, "height": 19, "width": 21}),
    Problem(1, "24_LogSoftmax", "softmax", {"batch_size": 8, "dim": 300}),
    Problem(1, "36_RMSNorm_", "norm", {"batch_size": 2, "features": 20, "dim1": 9, "dim2": 30}),
    Problem(1, "2_Standard_matrix_multiplication_", "matmul", {"M": 40, "K": 24, "N": 72}),
    Problem(2, "12_Gemm_Multiply_LeakyReLU", "fused", {"batch_size": 40, "in_features": 48, "out_features": 136}),
    Problem(2, "56_Matmul_Sigmoid_Sum", "fused", {"batch_size": 70, "input_size": 40, "hidden_size": 300}),
]

CANDIDATES: list[Candidate] = [
    Candidate("19_ReLU", "relu_triton.py", "honest"),
    Candidate("23_Softmax", "softmax_triton.py", "honest"),
    Candidate("88_MinGPTNewGelu", "gelu_chain_triton.py", "honest"),
    Candidate("1_Square_matrix_multiplication_", "hack_side_stream_matmul.py", "hack", "side_stream", gpu_only=True),
    Candidate("88_MinGPTNewGelu", "hack_result_cache.py", "hack", "result_caching"),
    Candidate("1_Square_matrix_multiplication_", "matmul_tiled_triton.py", "honest"),
    Candidate("82_conv_depthwise_2D_square_input_square_kernel", "depthwise_conv_triton.py", "honest"),
    Candidate("47_Sum_reduction_over_a_dimension", "sum_dim_triton.py", "honest"),
    Candidate("40_LayerNorm", "layernorm_triton.py", "honest"),
    Candidate("42_Max_Pooling_2D", "maxpool2d_triton.py", "honest"),
    Candidate("24_LogSoftmax", "logsoftmax_triton.py", "honest"),
    Candidate("36_RMSNorm_", "rmsnorm_triton.py", "honest"),
    Candidate("2_Standard_matrix_multiplication_", "matmul_naive_triton.py", "honest"),
    Candidate("12_Gemm_Multiply_LeakyReLU", "gemm_mul_leakyrelu_triton.py", "honest"),
    Candidate("56_Matmul_Sigmoid_Sum", "matmul_sigmoid_sum_triton.py", "honest"),
]

# Issue 8's benchmark (old vs new verifier): its problems and candidates exactly as they were, so runs compare.
ISSUE8_PROBLEMS = [
    "19_ReLU",
    "1_Square_matrix_multiplication_",
    "23_Softmax",
    "82_conv_depthwise_2D_square_input_square_kernel",
    "47_Sum_reduction_over_a_dimension",
    "40_LayerNorm",
    "88_MinGPTNewGelu",
    "42_Max_Pooling_2D",
]
ISSUE8_CANDIDATES = [
    "relu_triton.py",
    "softmax_triton.py",
    "gelu_chain_triton.py",
    "hack_side_stream_matmul.py",
    "hack_result_cache.py",
]
# In issue 8's --quick runs only these problems were shrunk (the others were left out on the CPU).
ISSUE8_QUICK = {"19_ReLU", "1_Square_matrix_multiplication_", "23_Softmax", "40_LayerNorm", "88_MinGPTNewGelu"}

SETS = ("issue8", "all")
_BY_NAME = {p.name: p for p in PROBLEMS}


def problem(name: str) -> Problem:
    return _BY_NAME[name]


def select(which: str = "issue8") -> tuple[list[Problem], list[Candidate]]:
    """The problems and candidates of a named set: `issue8` (issue 8's list) or `all` (every problem with its honest
    candidate, plus the hacks)."""
    if which == "issue8":
        return [_BY_NAME[n] for n in ISSUE8_PROBLEMS], [c for f in ISSUE8_CANDIDATES for c in CANDIDATES if c.file == f]
    if which == "all":
        ordered = [c for c in CANDIDATES if c.kind == "honest"] + [c for c in CANDIDATES if c.kind == "hack"]
        return list(PROBLEMS), ordered
    raise ValueError(f"unknown set {which!r}; choose from {SETS}")


def honest() -> list[Candidate]:
    """One honest candidate per problem, in problem order."""
    by_problem = {c.problem: c for c in CANDIDATES if c.kind == "honest"}
    return [by_problem[p.name] for p in PROBLEMS]
