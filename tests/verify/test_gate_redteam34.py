"""Red-team findings against issue 34's gate (/work/notes/redteam34.md), each a candidate that earned reward before
its fix: F1 getattr-by-string helpers re-exported by torch (operator.attrgetter, getattr_from_fqn) and dunder
strings; F2 paths through submodules the gate's process had not imported; F3 torch tensors handed to
tl.constexpr parameters (`@`, and in the replay any tensor); F4 candidate Python Triton runs inside a launch
(grids made by a call, a kernel's hook list or rewrite cache)."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkernel.config.verifier import VerifyOptions
from drkernel.verify.gate import check_source
from drkernel.verify.replay import model_locally

CANDIDATES = Path(__file__).parent / "candidates"
FINDINGS = {
    "escape_attrgetter_matmul": "torch.autograd.profiler_util is the module",
    "escape_lazy_matmul": "torch.ao is the module",
    "escape_unloaded_matmul": "triton.language.semantic is the module",
    "constexpr_tensor_matmul2": "@ inside a @triton.jit body",
    "grid_call_closure": "is a call that could return a function",
    "add_pre_run_hook": "used other than as kernel[grid](...)",
    "rewritten_fn": "used other than as kernel[grid](...)",
}


@pytest.mark.parametrize("name", sorted(FINDINGS))
def test_red_team_candidates_are_forbidden(name: str) -> None:
    result = check_source((CANDIDATES / f"redteam34_{name}.py").read_text())
    assert result.kind == "forbidden", result
    assert any(FINDINGS[name] in v for v in result.violations), result.violations


@pytest.mark.parametrize(
    "snippet",
    [
        # F1: the reach, however spelt
        "g = torch.autograd.profiler_util.attrgetter('x')",
        "g = torch.ao.quantization.utils.getattr_from_fqn",
        "d = {}\nb = d['__builtins__']",
        "import functools\ndef f():\n    pass\nfunctools.update_wrapper(f, torch.relu, updated=('x',))",
        "s = sys.modules",  # a name nothing in the source binds (a library call could put it in the globals)
        "c = torch.utils.checkpoint.TorchDispatchMode",
        "c = torch.utils.checkpoint.LoggingTensorMode",
        # F2: a path through a module the gate's process never imported
        "m = torch.ao.pruning.sparsifier.base_sparsifier.torch.sys",
        "m = torch.distributions.utils.lazy_property",
        "m = triton.language.semantic.builtins",
    ],
)
def test_getattr_helpers_unimported_modules_and_free_names_are_forbidden(snippet: str) -> None:
    source = "import torch\nimport triton\n" + snippet + "\n"
    assert check_source(source, require_triton=False).kind == "forbidden", snippet


OPTIONS = VerifyOptions(gpu_profile="h200", atol=1e-2, rtol=1e-2, correctness="strict")


def test_the_replay_refuses_a_tensor_handed_to_a_constexpr(tmp_path: Path) -> None:
    """F3 in cpu_model: the body's `C += A * B` on torch tensors was free in the replay (only tl ops are counted)."""
    reference = (CANDIDATES / "ref_mul_rt34.py").read_text()
    candidate = (CANDIDATES / "redteam34_constexpr_tensor_mul.py").read_text()
    assert check_source(candidate).passed  # the gate cannot tell a tensor from a number: the replay does
    out = model_locally(reference, candidate, str(tmp_path), OPTIONS)
    assert out["verdict"] == "mismatch" and "tl.constexpr A is handed a Tensor" in out["message"], out["message"]
