"""The static gate: its allow-list rejects each attack class and lets every honest kernel through."""

import sys
from pathlib import Path

import pytest

from drkernel.tasks import load_tasks
from drkernel.verify.static.gate import check_source

ROOT = Path(__file__).resolve().parents[3]
CANDIDATES = Path(__file__).parents[1] / "candidates"
sys.path.insert(0, str(ROOT / "benchmarks"))

from tutorial_kernels import TUTORIALS  # noqa: E402

KERNEL = """
import torch
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
"""

# gate_<name>.py -> a phrase its rejection must contain
GATE_FILES = {
    "builtins_import": "dunder name __builtins__",
    "class_creation": "class creation",
    "computed_import": "import of importlib",
    "dunder_walk": "dunder attribute .__class__",
    "eval_exec": "use of exec",
    "function_mode": "torch.overrides",
    "gc_walk": "import of gc",
    "getattr_by_name": "getattr with a computed attribute name",
    "global_hook": "register_module_forward_pre_hook",
    "import_builtins_module": "import of builtins",
    "inspect_frames": "import of inspect",
    "jit_calls_python": "helper inside a @triton.jit body",
    "jit_calls_torch": "torch.relu inside a @triton.jit body",
    "kernel_name_spoof": "imitates a library kernel name",
    "patch_setattr": "assignment to torch.allclose",
    "patch_tensor": "assignment to torch.Tensor.fast_path",
    "profiler": "torch.profiler",
    "seed_peek": "torch.initial_seed",
    "setprofile": "sys.setprofile",
    "sys_modules": "import of sys",
    "torch_function": "defines __torch_function__",
}


def honest_sources() -> dict[str, str]:
    """Shipped solutions, the benchmark's Triton candidates, the honest test candidates, the examples, our kernels
    shaped like Triton's tutorials."""
    found = {f"{t.name}/{label}": src for t in load_tasks() for label, src in t.solutions.items()}
    found.update({f"tutorial/{name}": candidate for name, (_, candidate) in TUTORIALS.items()})
    for pattern in (
        "benchmarks/candidates/*_triton.py",
        "tests/verify/candidates/honest_*.py",
        "examples/*/candidate.py",
    ):
        for path in sorted(ROOT.glob(pattern)):
            found[str(path.relative_to(ROOT))] = path.read_text()
    return found


HONEST = honest_sources()


def test_every_gate_candidate_file_is_covered():
    assert {p.stem.removeprefix("gate_") for p in CANDIDATES.glob("gate_*.py")} == set(GATE_FILES)


@pytest.mark.parametrize("name", sorted(GATE_FILES))
def test_gate_candidates_are_forbidden(name: str):
    result = check_source((CANDIDATES / f"gate_{name}.py").read_text())
    assert not result.passed and result.kind == "forbidden", result
    assert GATE_FILES[name] in result.message, result.message
    assert result.message.startswith("forbidden constructs: line ")


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_corpus_passes(name: str):
    result = check_source(HONEST[name])
    assert result.passed, result.message
    assert result.triton_kernels


def test_honest_corpus_is_the_measured_one():
    assert len(HONEST) >= 106 + 3 + 3 + 1 + 6


def test_honest_source_passes_and_names_its_kernels():
    result = check_source(KERNEL)
    assert result.passed and result.kind is None
    assert result.triton_kernels == ["k"]


def test_aliased_jit_decorators_are_recognised():
    src = KERNEL.replace("import triton\n", "import triton as tr\nfrom triton import jit\n")
    src = src.replace("@triton.jit", "@jit")
    assert check_source(src).triton_kernels == ["k"]
    src2 = KERNEL.replace("@triton.jit", "@triton.jit(do_not_specialize=['n'])")
    assert check_source(src2).passed
    src3 = KERNEL.replace("@triton.jit", "@tr.jit").replace("import triton\n", "import triton as tr\n")
    assert check_source(src3).triton_kernels == ["k"]


def test_syntax_error_is_classified():
    result = check_source("def broken(:\n  pass")
    assert not result.passed and result.kind == "syntax" and "line 1" in result.message


def test_no_triton_kernel_rejected_only_when_required():
    src = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"
    assert check_source(src).kind == "no_triton"
    assert check_source(src, require_triton=False).passed


@pytest.mark.parametrize(
    "snippet, needle",
    [
        ("import subprocess", "import of subprocess"),
        ("import os", "import of os"),
        ("from os import fork", "import from os"),
        ("import numpy as np", "import of numpy"),
        ("import drkernel.verify.engine", "import of drkernel.verify.engine"),
        ("from . import x", "import from ."),
        ("from torch import *", "star import"),
        ("from torch import _C", "private or dunder name torch._C"),
        ("x = torch._C", "private or dunder name torch._C"),
        ("from triton import knobs", "forbidden API triton.knobs"),
        ("triton.knobs.runtime.launch_enter_hook = None", "triton.knobs"),
        ("from triton.runtime import driver", "import from triton.runtime"),
        ("x = __import__('socket')", "use of __import__"),
        ("eval('1')", "use of eval"),
        ("f = exec", "use of exec"),
        ("c = compile('1', 'f', 'eval')", "use of compile"),
        ("g = globals()", "use of globals"),
        ("v = vars(torch)", "use of vars"),
        ("with open('notes.txt') as f:\n    pass", "use of open"),
        ("g = getattr", "getattr used other than as a call"),
        ("n = 'cuda'\nm = getattr(torch, n)", "getattr with a computed attribute name"),
        ("m = getattr(torch, 'cuda').Stream", "forbidden attribute .Stream"),
        ("ok = hasattr(torch, '_C')", "private or dunder name torch._C"),
        ("class A:\n    def f(self, n):\n        return getattr(self, n)", "computed attribute name"),
        ("class A:\n    def f(self, i):\n        return getattr(self, '_' + i)", "computed attribute name"),
        ("x = (1).__class__", "dunder attribute .__class__"),
        ("x = k.__globals__", "dunder attribute .__globals__"),
        ("y = torch.Tensor.__dict__", "private or dunder name torch.Tensor.__dict__"),
        ("def __getattr__(name):\n    return name", "defines __getattr__"),
        ("__builtins__ = {}", "__builtins__"),
        ("match 1:\n    case object(__class__=c):\n        pass", "dunder attribute .__class__"),
        (
            "def f():\n    try:\n        raise ValueError\n    except ValueError as e:\n        return e.tb_frame",
            "tb_frame",
        ),
        ("s = torch.cuda.Stream()", "forbidden API torch.cuda.Stream"),
        ("with torch.cuda.stream(None):\n    pass", "forbidden API torch.cuda.stream"),
        ("s = torch.npu.Stream()", "forbidden API torch.npu.Stream"),
        ("from torch.cuda import Stream", "forbidden API torch.cuda.Stream"),
        ("g = torch.cuda.CUDAGraph()", "CUDAGraph"),
        ("torch.allclose = lambda *a, **k: True", "monkey-patching"),
        ("torch.Tensor.clone = lambda self: self", "monkey-patching"),
        ("import torch as T\nT.cuda.synchronize = None", "assignment to torch.cuda.synchronize"),
        ("from torch import Tensor\nTensor.add = None", "assignment to torch.Tensor.add"),
        ("(T := torch.Tensor).add = None", "monkey-patching"),
        ("del torch.Tensor.add", "monkey-patching"),
        ("t = type(torch.zeros(1))\nt.add = None", "monkey-patching"),
        ("type(torch.zeros(1)).add = None", "monkey-patching"),
        ("torch.backends.cuda.matmul.allow_tf32 = True", "torch.backends"),
        ("class Fake(torch.Tensor):\n    pass", "subclasses torch.Tensor"),
        ("class M(type):\n    pass\nclass C(metaclass=M):\n    pass", "metaclass"),
        ("torch.Tensor.register_hook(torch.zeros(1), None)", "register_hook"),
        ("m = torch.nn.Linear(2, 2)\nm.register_forward_pre_hook(None)", "register_forward_pre_hook"),
        ("f = torch.compile(lambda x: x)", "forbidden API torch.compile"),
        ("from torch.utils.cpp_extension import load_inline", "import from torch.utils.cpp_extension"),
        ("torch.ops.load_library('x.so')", "load_library"),
        ("s = torch.get_rng_state()", "get_rng_state"),
        ("torch.manual_seed(0)", "manual_seed"),
        ("x = torch.load('f.pt')", "forbidden API torch.load"),
        ("from torch.autograd import profiler", "torch.autograd.profiler"),
        ("p = torch.autograd.graph.saved_tensors_hooks", "torch.autograd.graph"),
        ("from torch.utils.cpp_extension import load_inline", "torch.utils.cpp_extension"),
        ("m = torch.get_device_module()", "get_device_module"),
        # module and global-class objects may not travel into names no rule follows
        ("mods = [torch]\nmods[0].allclose = None", "module torch used as a value"),
        ("def f(m=torch.cuda):\n    m.synchronize = None", "module torch.cuda used as a value"),
        ("def f():\n    return torch.Tensor", "module or class torch.Tensor used as a value"),
        ("class A:\n    t = torch.Tensor", "module or class torch.Tensor used as a value"),
        ("def g(c):\n    c.add = None\ng(torch.Tensor)", "module or class torch.Tensor used as a value"),
        ("def g():\n    return type(torch.zeros(1))", "type() result used as a value"),
        ("c = type(torch.zeros(1)).mro()", "forbidden attribute .mro"),
        ("import typing\nh = typing.get_type_hints(k)", "get_type_hints"),
    ],
)
def test_forbidden_constructs(snippet: str, needle: str):
    result = check_source(KERNEL + "\n" + snippet + "\n")
    assert not result.passed and result.kind == "forbidden", snippet
    assert needle in result.message, result.message


JIT_BODY = """
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice
import math
import torch.nn.functional as F

@triton.jit
def helper(v):
    return v * 2

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-float("inf"))
    BODY
    tl.store(x_ptr + offs, x, mask=offs < n)
"""


@pytest.mark.parametrize(
    "line",
    [
        "x = helper(x)",
        "x = libdevice.exp(x)",
        "x = tl.math.exp(x)",
        "x = x.to(tl.float32)",
        "x = (x > 0).to(tl.float32) * x",
        "x = tl.sum(x, axis=0) + x",
        "x = x + min(BLOCK, 4) + max(1, 2) + len((1, 2)) + int(1.5)",
        "for i in range(2):\n        x = x + i",
        "for i in tl.static_range(2):\n        x = x + i",
        "tl.static_assert(BLOCK > 0)",
        "tl.device_assert(n > 0)",
        "x = x * triton.cdiv(n, 2)",
        "x = x * math.sqrt(2.0)",
    ],
)
def test_triton_operations_in_jit_bodies_pass(line: str):
    result = check_source(JIT_BODY.replace("BODY", line))
    assert result.passed, result.message


@pytest.mark.parametrize(
    "line, needle",
    [
        ("x = torch.exp(x)", "torch.exp inside a @triton.jit body"),
        ("x = x * F.relu(x)", "torch.nn.functional.relu inside a @triton.jit body"),
        ("x = abs(x)", "call to abs inside a @triton.jit body"),
        ("x = x.numpy()", ".numpy inside a @triton.jit body"),
        ("x = n.bit_length()", ".bit_length inside a @triton.jit body"),
        ("x = (lambda v: v)(x)", "lambda inside a @triton.jit body"),
        ("x = print.__call__(x)", "dunder attribute .__call__"),
        ("x = triton.runtime.driver.active.get_current_stream()", "triton.runtime"),
    ],
)
def test_non_triton_calls_in_jit_bodies_are_forbidden(line: str, needle: str):
    result = check_source(JIT_BODY.replace("BODY", line))
    assert result.kind == "forbidden" and needle in result.message, result.message


def test_jit_body_may_not_call_a_global_object():
    src = JIT_BODY.replace("BODY", "x = TABLE.to(x)").replace("import math\n", "import math\nTABLE = object()\n")
    result = check_source(src)
    assert result.kind == "forbidden" and "name TABLE inside a @triton.jit body" in result.message


@pytest.mark.parametrize(
    "snippet",
    [
        "class Holder:\n    pass\nh = Holder()\nh.value = 3",
        "class A(torch.nn.Module):\n    def __init__(self):\n        torch.nn.Module.__init__(self)\n"
        "        self._cache = {}",
        "class A(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        for i in range(2):\n            setattr(self, f'conv{i}', torch.nn.Identity())\n"
        "    def forward(self, x):\n        return getattr(self, 'conv' + str(0))(x)",
        "class F(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        ctx.scale = 2\n"
        "        ctx.save_for_backward(x)\n        return x",
        "from typing import Optional\nimport functools\n@functools.lru_cache(maxsize=None)\n"
        "def grid(n: int) -> tuple:\n"
        "    return (triton.cdiv(n, 1024),)",
        "if __name__ == '__main__':\n    print(torch.cuda.is_available())\n    torch.cuda.synchronize()",
        "x = torch.zeros(4)\nx[0] = 1.0\nx[1:] += 2.0",
        "import torch.nn.functional as F\ny = F.relu(torch.zeros(2))",
        "t = type(torch.zeros(1)) is torch.Tensor",
        "fan_in, _ = torch.nn.init._calculate_fan_in_and_fan_out(torch.zeros(2, 2))",
        "from torch.utils.checkpoint import checkpoint\n"
        "y = checkpoint(torch.relu, torch.zeros(2), use_reentrant=False)",
        "lstm = torch.nn.LSTM(2, 2)\nw = getattr(lstm, f'weight_ih_l{0}')",
        "class Block(torch.nn.Module):\n    def __init__(self, norm_layer=torch.nn.LayerNorm, act=torch.nn.GELU):\n"
        "        super().__init__()\n        self.norm, self.act = norm_layer(4), act()",
        "class Net(torch.nn.Module):\n    class _Inner(torch.nn.Module):\n        pass\n"
        "    def __init__(self):\n        super().__init__()\n        self.inner = Net._Inner()\n"
        "        for layer in [torch.nn.Linear(2, 2)]:\n            layer.weight.data = torch.zeros(2, 2)",
        "def forward(input):\n    return input * 2",
        "y = isinstance(torch.zeros(1), (torch.Tensor, list))",
        "def f(x: torch.Tensor) -> torch.Tensor:\n    return x",
        "@triton.autotune(configs=[triton.Config({'BLOCK': 64}, num_warps=4)], key=['n'])\n@triton.jit\n"
        "def k2(x_ptr, n, BLOCK: tl.constexpr):\n    pass",
    ],
)
def test_ordinary_python_is_allowed(snippet: str):
    result = check_source(KERNEL + "\n" + snippet + "\n")
    assert result.passed, result.message


def test_violations_are_listed_by_line():
    result = check_source(KERNEL + "\nimport gc\nimport os\nx = eval('1')\n")
    lines = [int(v.split(":")[0].removeprefix("line ")) for v in result.violations]
    assert lines == sorted(lines) and len(lines) == 3


# Paths that only the walk over the real objects catches: no name on them is private or denied, the module
# reached is re-exported by an allowed one (red-team finding 1). Each line -> a phrase its rejection contains.
@pytest.mark.parametrize(
    "snippet, needle",
    [
        ("m = torch.importlib.reload", "torch.importlib is the module importlib"),
        ("p = torch.os.getpid()", "torch.os is the module os"),
        ("n = torch.nn.functional.np.zeros(2)", "is the module numpy"),
        ("import typing\nm = typing.sys.modules.get('os')", "typing.sys is the module sys"),
        ("from typing import sys", "typing.sys is the module sys"),
        ("t = getattr(torch, 'threading')", "torch.threading is the module threading"),
        ("import torch.nn.functional as F\nf = F.dataclasses.field", "is the module dataclasses"),
        ("import triton.language as tl\nf = tl.extra.module_from_spec", "defined in _frozen_importlib"),
        ("import functools\nlock = functools.RLock()", "defined in _thread"),
        # Aliases of denied paths: the real module or object is denied, whatever the path's text says.
        ("import torch.nn.functional as F\ns = F.torch.jit.script", "torch.jit"),
        ("import torch.nn.functional as F\nx = F.torch.load('w.pt')", "is forbidden API torch.load"),
        ("import torch.nn.functional as F\nh = F.torch.utils.hooks", "torch.utils.hooks"),
        ("import torch.nn.functional as F\nF.torch.cuda.memory.empty_cache()", "torch.cuda.memory"),
    ],
)
def test_paths_are_walked_over_the_real_objects(snippet: str, needle: str):
    result = check_source(KERNEL + "\n" + snippet + "\n")
    assert not result.passed and result.kind == "forbidden", result
    assert needle in result.message, result.message


@pytest.mark.parametrize(
    "snippet",
    [
        "import typing\nd = typing.collections.OrderedDict()",  # collections is allowed
        "import torch.nn.functional as F\ny = F.torch.relu(torch.zeros(2))",  # torch is torch
        "import torch.nn.functional as F\nc = F.torch.utils.checkpoint.checkpoint",  # open under torch.utils
        "import functools\nr = functools.reduce(lambda a, b: a + b, [1, 2])",  # defined in _functools
        "import triton.language as tl\nf = tl.extra.cuda.libdevice.tanh",
        "y = torch.ops.aten.relu(torch.zeros(2))",  # torch.ops builds namespaces lazily: names judge them
        "c = triton.Config({'BLOCK': 64}, num_warps=4)\nc.block = 64",  # a library class builds a fresh object
        "out = torch.empty(4)\nout[0] = 1.0\nout[1:] *= 2.0",  # items of a fetched tensor
    ],
)
def test_real_paths_and_fresh_objects_that_stay_allowed(snippet: str):
    result = check_source(KERNEL + "\n" + snippet + "\n")
    assert result.passed, result.message


# A name bound from a call, item or attribute read holds an object fetched from elsewhere (possibly a harness
# module): storing into its attributes is monkey-patching, however the object was reached.
@pytest.mark.parametrize(
    "snippet",
    [
        "x = torch.zeros(2)\nx.foo = 1",
        "def get():\n    return torch.nn\nm = get()\nm.Linear = None",
        "d = {}\nm = d['harness']\nm.run = None",
        "fs = [torch.relu]\nq = fs[0]\nr = q\nr.cache = {}",
        "o = torch.zeros(2).grad_fn\no.name = 'x'",
        "for mod in torch.nn.Linear(2, 2).modules():\n    mod.forward = print",
        "x = torch.zeros(2)\nsetattr(x, 'foo', 1)",
        "x = torch.zeros(2)\nx.foo += 1",
        "x = torch.zeros(2)\ndel x.foo",
        "a, (b, c) = torch.zeros(2), (1, torch.ones(2))\nc.foo = 1",
    ],
)
def test_attribute_stores_into_fetched_objects_are_forbidden(snippet: str):
    result = check_source(KERNEL + "\n" + snippet + "\n")
    assert not result.passed and result.kind == "forbidden", result
    assert "holds an object fetched" in result.message, result.message


def test_files_and_loaders_on_any_object_are_forbidden():
    for line in (
        "torch.zeros(2).numpy().tofile('/tmp/x')",
        "torch.zeros(2).numpy().dump('/tmp/x')",
        "a = torch.zeros(2).numpy().ctypes",
        "s = torch.UntypedStorage.from_file('/etc/hostname', False, 4)",
        "torch.ops.import_module('os')",
        "torch.ops.load_library('x.so')",
    ):
        result = check_source(KERNEL + "\n" + line + "\n")
        assert not result.passed and result.kind == "forbidden", (line, result)


ASCEND_KERNEL = """
import torch
import torch_npu
import triton
import triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        n = x.numel()
        add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
        return out
"""


def test_an_honest_ascend_kernel_passes_and_torch_npu_keeps_the_rules():
    result = check_source(ASCEND_KERNEL)
    assert result.passed, result.violations
    for line, needle in (
        ("s = torch_npu.npu.Stream()", "forbidden API torch_npu.npu.Stream"),
        ("p = torch_npu.profiler.profile", "forbidden API torch_npu.profiler"),
        ("torch_npu.npu.memory.empty_cache()", "forbidden API torch_npu.npu.memory"),
        ("torch_npu.distributed.barrier()", "forbidden API torch_npu.distributed"),
    ):
        bad = check_source(ASCEND_KERNEL + "\n" + line + "\n")
        assert not bad.passed and any(needle in v for v in bad.violations), (line, bad.violations)
