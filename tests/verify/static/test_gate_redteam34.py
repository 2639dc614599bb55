"""Red-team findings against issue 34's gate (/work/notes/redteam34.md), each a candidate that earned reward before
its fix: F1 getattr-by-string helpers re-exported by torch (operator.attrgetter, getattr_from_fqn) and dunder
strings; F2 paths through submodules the gate's process had not imported; F3 torch tensors handed to
tl.constexpr parameters (`@`, and in the replay any tensor); F4 candidate Python Triton runs inside a launch
(grids made by a call, a kernel's hook list or rewrite cache)."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkernel.config.verifier import VerifyOptions
from drkernel.verify.cost_model.replay import model_locally
from drkernel.verify.static.gate import check_source

CANDIDATES = Path(__file__).parents[1] / "candidates"
FINDINGS = {
    "escape_attrgetter_matmul": "torch.autograd.profiler_util is the module",
    "escape_lazy_matmul": "torch.ao is the module",
    "escape_unloaded_matmul": "triton.language.semantic is the module",
    "constexpr_tensor_matmul2": "@ inside a @triton.jit body",
    "grid_call_closure": "is a call that could return a function",
    "add_pre_run_hook": "used other than as kernel[grid](...)",
    "rewritten_fn": "used other than as kernel[grid](...)",
    "list_tensor_matmul": "@ inside a @triton.jit body",
    "escape_update_wrapper_matmul": "forbidden API functools.update_wrapper",
    "escape_pointer_poke_matmul": "name id is bound nowhere",
    "fake_tensor_arg": "defines data_ptr",
    "computed_getattr_hook": "could spell the denied 'kernel'",
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
        # F5: attribute names handed to a copier
        "import functools\ndef f():\n    pass\nw = functools.wraps(torch.relu, updated=('x',))",
        # F6: an object's address (the CPU interpreter's pointers are not bounded in the candidate's process)
        "a = id(torch)",
        "a = hash(torch.relu)",
        # F7: an object Triton would take for a tensor
        "class T:\n    data_ptr = None",
        "class T:\n    def untyped_storage(self):\n        return None",
        "class T:\n    def __init__(self):\n        self.data_ptr = print",
        "class T:\n    def f(self):\n        setattr(self, 'data' + '_ptr', print)",
        "import collections\nP = collections.namedtuple('P', 'data_ptr')",
        "class Fake(torch.nn.Parameter):\n    pass",
        # F4 (h): the kernel reached by a literal getattr
        "import triton.language as tl\nclass M:\n    @triton.jit\n    def kernel(x):\n        pass\n"
        "    def f(self):\n        getattr(self, 'kernel').add_pre_run_hook(print)",
        # F7b/F7c: submodules named like tensor methods, a tuple subclass Triton rebuilds inside the launch
        "class L(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.add_module('data_ptr', torch.nn.Identity())",
        "class Args(tuple):\n    def __init__(self, items):\n        super().__init__()",
        "import typing\nclass P(typing.NamedTuple):\n    x: int",
        # N1: self/cls/ctx only as the first parameter of a method
        "def f(self):\n    return self._C\nx = f(torch.relu)",
        "class A:\n    def f(x, self):\n        return self._C",
        "g = lambda self: self._C",
        # N2: native loaders and writers at torch's top level
        "w = torch.PyTorchFileWriter('/tmp/x')",
        "f = torch.jit._script",
        "torch.set_anomaly_enabled(True)",
        "r = torch.parse_ir('graph(): return ()')",
    ],
)
def test_getattr_helpers_unimported_modules_and_free_names_are_forbidden(snippet: str) -> None:
    source = "import torch\nimport triton\n" + snippet + "\n"
    assert check_source(source, require_triton=False).kind == "forbidden", snippet


JIT_KERNEL = """
import torch
import triton
import triton.language as tl


def meta(grid, kernel, args):
    return {"name": "matmul_kernel"}


@triton.jit{options}
def copy(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = x.clone()
        copy[(1,)](y, y.numel(), BLOCK=1024)
        return y
"""


@pytest.mark.parametrize("options", ["(launch_metadata=meta)", "(repr=meta)", "(meta)", "(debug=meta)"])
def test_jit_options_that_run_candidate_functions_in_the_launcher_are_forbidden(options: str) -> None:
    """Red team, untested on a GPU: launch_metadata= and repr= run in the verifier's launch hook on a compiled
    launch, where they could report any name or stream for it."""
    assert check_source(JIT_KERNEL.replace("{options}", options)).kind == "forbidden", options
    for honest in ("", "(do_not_specialize=[1])", "(debug=True)"):
        assert check_source(JIT_KERNEL.replace("{options}", honest)).passed, honest


OPTIONS = VerifyOptions(gpu_profile="h200", atol=1e-2, rtol=1e-2, correctness="strict")


def test_the_replay_refuses_a_list_of_tensors_as_a_launch_argument(tmp_path: Path) -> None:
    """F3 variant in cpu_model: a list argument reaches the body as torch tensors, free in the replay."""
    reference = (CANDIDATES / "ref_mul_rt34.py").read_text()
    candidate = (CANDIDATES / "redteam34_list_tensor_mul.py").read_text()
    assert check_source(candidate).passed
    out = model_locally(reference, candidate, str(tmp_path), OPTIONS)
    assert out["verdict"] == "mismatch" and "T is a list holding tensors" in out["message"], out["message"]


def test_the_replay_refuses_a_tensor_handed_to_a_constexpr(tmp_path: Path) -> None:
    """F3 in cpu_model: the body's `C += A * B` on torch tensors was free in the replay (only tl ops are counted)."""
    reference = (CANDIDATES / "ref_mul_rt34.py").read_text()
    candidate = (CANDIDATES / "redteam34_constexpr_tensor_mul.py").read_text()
    assert check_source(candidate).passed  # the gate cannot tell a tensor from a number: the replay does
    out = model_locally(reference, candidate, str(tmp_path), OPTIONS)
    assert out["verdict"] == "mismatch" and "tl.constexpr A is handed a Tensor" in out["message"], out["message"]
