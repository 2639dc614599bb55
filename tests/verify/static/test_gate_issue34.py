"""Issue 34: the gate decides on real objects, kernel bodies are the Triton language, the replay evaluates nothing
of the candidate's. Each attack class of the issue is a whole candidate here that passed the gate before the fix
(checked against the gate at 92950bf); the generated spellings go through check_source only (fast)."""

from __future__ import annotations

import itertools

import pytest

from drkernel.verify.static.gate import check_source

HEAD = """
import functools
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 4, num_layers=2)

    def forward(self, x):
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
"""

# The classes as whole candidates: name -> (the attack appended to HEAD, a phrase its rejection holds).
ATTACKS = {
    # 1. a torch submodule not on the old name list travels as a value, then reaches os/sys and the real setattr
    "module_in_tuple": (
        "_m = (torch.autograd.forward_ad,)[0]\n_sys = _m.os.sys\n"
        "_b = _sys.modules['builtins']\n_b.setattr(_sys.modules['drkernel.verify.harness.runner'], 'x', None)\n",
        "module torch.autograd.forward_ad used as a value",
    ),
    "module_through_argument": (
        "def _reach(m):\n    return m.os.sys.modules\n_mods = _reach(torch.autograd.forward_ad)\n",
        "module torch.autograd.forward_ad used as a value",
    ),
    "built_name_on_a_fetched_object": (
        "_a = torch.zeros(2).numpy()\n_w = getattr(_a, 'to' + 'file')\n",
        "computed attribute name on other than the candidate's own objects",
    ),
    "built_name_that_grows_into_a_denied_one": (
        "class Own(nn.Module):\n    def f(self):\n        return getattr(self, 'register_forward_' + 'pre_hook')\n",
        "could spell the denied",
    ),
    # 2. a jit default evaluated where the replay rebuilt the kernel: it rebound the replay's pricing function
    "jit_default_runs_in_the_replay": (
        "@triton.jit\n"
        "def k2(x_ptr, B: tl.constexpr = (lambda s: s.modules.get('x'))((lambda m: m.os.sys)"
        "((torch.autograd.forward_ad,)[0]))):\n    pass\n",
        "default of a @triton.jit parameter is not a literal",
    ),
    "jit_annotation_runs_in_the_replay": (
        "@triton.jit\ndef k2(x_ptr: print('at import'), B: tl.constexpr = 4):\n    pass\n",
        "annotation of k2's x_ptr is not tl.constexpr",
    ),
    # 3. any module-level object handed to tl.reduce: the interpreter calls its .fn as plain Python in the launch
    "reduce_with_a_python_object": (
        "class _Combine:\n    @staticmethod\n    def fn(a, b):\n        return a + b\n"
        "@triton.jit\ndef k2(x_ptr, B: tl.constexpr):\n"
        "    x = tl.load(x_ptr + tl.arange(0, B))\n    tl.store(x_ptr, tl.reduce(x, 0, _Combine))\n",
        "combine_fn of tl.reduce is not one of the file's @triton.jit functions",
    ),
    "reduce_with_a_parameter": (
        "@triton.jit\ndef k2(x_ptr, f, B: tl.constexpr):\n"
        "    x = tl.load(x_ptr + tl.arange(0, B))\n    tl.store(x_ptr, x.reduce(0, f))\n",
        "combine_fn of x.reduce is not one of the file's @triton.jit functions",
    ),
    # also let through: numerics switches, torch.compiler, parallel_apply, property(...) class attributes
    "float32_matmul_precision": ("torch.set_float32_matmul_precision('medium')\n", "set_float32_matmul_precision"),
    "cudnn_flags": (
        "class M2(nn.Module):\n    def forward(self, x):\n        with torch.backends.cudnn.flags(enabled=True, "
        "allow_tf32=True):\n            return x\n",
        "torch.backends",
    ),
    "preferred_blas_library": ("torch.backends.cuda.preferred_blas_library('cublaslt')\n", "torch.backends"),
    "default_dtype": ("torch.set_default_dtype(torch.float16)\n", "set_default_dtype"),
    "compiler_compile": ("_f = torch.compiler.compile(torch.relu)\n", "torch.compiler"),
    "compiler_disable": ("@torch.compiler.disable\ndef _g(x):\n    return x\n", "torch.compiler"),
    "parallel_apply": ("_p = torch.nn.parallel.parallel_apply\n", "torch.nn.parallel"),
    "property_class_attribute": ("class P(nn.Module):\n    w = property(lambda self: 1)\n", "use of property"),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_each_attack_class_is_forbidden(name: str) -> None:
    attack, needle = ATTACKS[name]
    result = check_source(HEAD + "\n" + attack)
    assert result.kind == "forbidden", (name, result)
    assert any(needle in v for v in result.violations), result.violations


def test_the_candidates_are_honest_without_their_attack() -> None:
    assert check_source(HEAD).passed


# -- generated spellings of the same reach, through check_source only ------------------------------------
# Modules reached from torch that no name list named (the old gate decided on the last name of a path).
MODULES = ("torch.autograd.forward_ad", "torch.nn.modules.module", "torch.autograd.function", "torch.cuda")
# Ways a value travels where no rule follows it; {M} is the module's path.
CARRIERS = (
    "x = ({M},)[0]",
    "x = [{M}][0]",
    "x = {{'k': {M}}}['k']",
    "x, = ({M},)",
    "x = [*[{M}]]",
    "x = {M} if True else None",
    "x = {M} or None",
    "def f(m):\n    return m\nx = f({M})",
    "x = print({M})",
    "x = functools.partial(print, {M})",
    "f = lambda: {M}",
    "f = lambda m={M}: m",
    "x = [{M} for _ in range(1)]",
    "x = {{k: {M} for k in range(1)}}",
    "x = list({M} for _ in range(1))",
    "if (x := {M}):\n    pass",
    "def f(m={M}):\n    return m",
    "def f(*, m={M}):\n    return m",
    "class C:\n    m = {M}",
    "@functools.partial(print, {M})\ndef f():\n    pass",
    "def g():\n    return {M}",
    "def g():\n    yield {M}",
    "x = type({M})",
    "X = {M}\ndef f(X):\n    return X",
    "X = {M}\nX = 1",
    "def f():\n    X = {M}\n    return X",
    "x = getattr({P}, '{L}')",
    "x = ({P}, '{L}')[0].{L}",
)


@pytest.mark.parametrize("carrier, module", list(itertools.product(CARRIERS, MODULES)))
def test_a_module_never_travels_as_a_value(carrier: str, module: str) -> None:
    parent, _, last = module.rpartition(".")
    result = check_source(HEAD + "\n" + carrier.format(M=module, P=parent, L=last) + "\n")
    assert result.kind == "forbidden", (carrier, module)


# Attribute names built at run time, on receivers that are not the candidate's own or with heads that could spell
# a private or denied name.
COMPUTED = (
    "x = getattr(torch.zeros(1), 'o' + 's')",
    "n = 'os'\nx = getattr(torch, n)",
    "x = getattr(torch, f'{chr(111)}s')",
    "x = hasattr(torch, 'o' + 's')",
    "t = torch.zeros(1)\nsetattr(t, 'a' + 'b', 1)",
    "t = torch.zeros(1)\ndelattr(t, 'a' + 'b')",
    "class A(nn.Module):\n    def f(self, n):\n        return getattr(self, n)",
    "class A(nn.Module):\n    def f(self, n):\n        return getattr(self, '_' + n)",
    "class A(nn.Module):\n    def f(self, n):\n        return getattr(self, f'{n}x')",
    "class A(nn.Module):\n    def f(self, n):\n        return getattr(self, f'{\"_\"}{n}')",
    "class A(nn.Module):\n    def f(self):\n        return getattr(self.w.numpy(), 'to' + 'file')",
    "class A(nn.Module):\n    def f(self):\n        return getattr(self.lstm, 'register_' + 'forward_hook')",
    "class A(nn.Module):\n    def f(self):\n        return getattr(self.lstm, f'register_{1}')",
    "class A(nn.Module):\n    def f(self):\n        return getattr(self, 'allow_' + 'tf32')",
    "class A(nn.Module):\n    def f(self):\n        return getattr(self, 'set_autocast' + '_enabled')",
    "class A(nn.Module):\n    def f(self, x):\n        return getattr(x, 'weight' + '_ih')",
    "g = globals()",
    "v = vars()",
    "class A(nn.Module):\n    def f(self):\n        return vars(self)",
    "class A(nn.Module):\n    def f(self):\n        return self.__dict__",
    "class A(nn.Module):\n    def f(self):\n        return type(self).__dict__",
    "x = type('X', (), {})",
    "g = getattr",
    "x = [getattr][0](torch, 'os')",
)


@pytest.mark.parametrize("snippet", COMPUTED)
def test_computed_attribute_names_only_on_own_objects_and_safe_heads(snippet: str) -> None:
    assert check_source(HEAD + "\n" + snippet + "\n").kind == "forbidden", snippet


# Honest spellings that must stay legal.
HONEST = (
    "class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.lstm = nn.LSTM(2, 2, 2)\n"
    "    def f(self, i):\n        return getattr(self.lstm, f'weight_ih_l{i}')",
    "class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n        for i in range(2):\n"
    "            setattr(self, f'conv{i}', nn.Conv2d(2, 2, 1))\n"
    "    def f(self, i):\n        return getattr(self, 'conv' + str(i))",
    "lstm = nn.LSTM(2, 2)\nw = getattr(lstm, f'weight_hh_l{0}')",
    "class A(nn.Module):\n    def f(self, i):\n        lstm = self.lstm\n"
    "        return getattr(lstm, f'weight_ih_l{i}')",
    "torch.cuda.empty_cache()\nm = torch.cuda.max_memory_allocated()",
    "F = torch.nn.functional\ny = F.relu(torch.zeros(1))",
    "class B(nn.Module):\n    def __init__(self, norm=nn.LayerNorm, dtype=torch.float32):\n        super().__init__()\n"
    "        self.n = norm(4).to(dtype)",
    "acts = [torch.relu, torch.sigmoid, nn.functional.gelu]",
    "y = isinstance(torch.zeros(1), torch.Tensor)",
    "with torch.no_grad():\n    pass",
    "with torch.cuda.device(0):\n    pass",
    "x = torch.finfo(torch.float32).max",
    "x = torch.ops.aten.relu(torch.zeros(1))",
)


@pytest.mark.parametrize("snippet", HONEST)
def test_honest_spellings_stay_legal(snippet: str) -> None:
    result = check_source(HEAD + "\n" + snippet + "\n")
    assert result.passed, result.message


# -- kernel bodies: the Triton language only --------------------------------------------------------------
BODY_HEAD = """
import math
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

N = 4
C = tl.constexpr(8)
TABLE = {"a": 1}

@triton.jit
def combine(a, b):
    return a + b

@triton.jit
def k(x_ptr, n, B: tl.constexpr, EPS: tl.constexpr = 1e-5, FLAG: tl.constexpr = -1):
    offs = tl.arange(0, B)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-float("inf"))
    BODY
"""

BODY_LEGAL = (
    "y = tl.reduce(x, 0, combine) + tl.associative_scan(x, 0, combine)",
    "y = tl.reduce(x, 0, combine_fn=combine) + x.reduce(0, combine)",
    "y = combine(x, x) * N + C + EPS + math.pi + math.sqrt(2.0)",
    "y = libdevice.exp(x.to(tl.float32)) + tl.math.exp(x)",
    "y = x_ptr.dtype.element_ty\n    z = x.shape[0] + x.numel",
    "y = triton.cdiv(n, B) + triton.next_power_of_2(B) + min(B, 2) + max(1, 2) + len((1, 2))",
    "for i in tl.static_range(2):\n        x += i\n    for j in range(2):\n        x += j",
    "tl.static_assert(B > 0)\n    tl.device_assert(n > 0)",
    "if isinstance(B, int):\n        x = x * 2",
    "y = tl.where(x > 0, x, 0.0).to(tl.float16, bitcast=False)",
)
BODY_ILLEGAL = (
    "y = tl.reduce(x, 0, TABLE)",
    "y = tl.reduce(x, 0, tl.maximum)",
    "y = tl.associative_scan(x, 0, lambda a, b: a + b)",
    "y = tl.map_elementwise(TABLE, x)",
    "y = TABLE['a']",
    "y = x.handle.data",
    "y = tl.core.builtins",
    "y = tl.standard.math",
    "y = combine.fn(x, x)",
    "y = getattr(x, 'dtype')",
    "print(x)",
    "y = torch.relu(x)",
    "y = triton.runtime",
    "y = [i for i in range(2)]",
    "def g():\n        pass",
    "with x:\n        pass",
    "global N",
    "tl.load = None",
    "y = x.format(1)",
    "y = f'{x}'",
    "y = abs(x)",
    "y = np.zeros(2)",
    "y = combine[(1,)](x, x)",
)


@pytest.mark.parametrize("body", BODY_LEGAL)
def test_triton_language_in_a_kernel_body_passes(body: str) -> None:
    result = check_source(BODY_HEAD.replace("BODY", body))
    assert result.passed, result.message


@pytest.mark.parametrize("body", BODY_ILLEGAL)
def test_anything_else_in_a_kernel_body_is_forbidden(body: str) -> None:
    result = check_source(BODY_HEAD.replace("BODY", body))
    assert result.kind == "forbidden" and any("@triton.jit" in v for v in result.violations), result


@pytest.mark.parametrize(
    "signature, needle",
    [
        ("x_ptr, B: tl.constexpr = N", "not a literal"),
        ("x_ptr, B: tl.constexpr = (1, 2)", "not a literal"),
        ("x_ptr, B: tl.constexpr = torch.float32", "not a literal"),
        ("x_ptr: torch.Tensor, B: tl.constexpr = 4", "is not tl.constexpr"),
        ("x_ptr, B: 'tl.constexpr' = 4", "is not tl.constexpr"),
        ("x_ptr: tl.core.builtin, B: tl.constexpr = 4", "is not tl.constexpr"),
        ("x_ptr) -> torch.relu(1", "return annotation of k2"),
        ("x_ptr, *rest", "*args or **kwargs"),
        ("x_ptr, **kw", "*args or **kwargs"),
    ],
)
def test_a_jit_signature_carries_no_expression(signature: str, needle: str) -> None:
    """Annotations: tl.constexpr (the replay keeps its mark), or a plain type hint it drops (`n: tl.int32`)."""
    src = BODY_HEAD.replace("BODY", "pass") + f"\n@triton.jit\ndef k2({signature}):\n    pass\n"
    result = check_source(src)
    assert result.kind == "forbidden" and any(needle in v for v in result.violations), result.violations


def test_triton_type_hints_on_jit_parameters_stay_legal() -> None:
    hints = "x_ptr: tl.tensor, n: tl.int32, m: int, f: float, B: tl.constexpr = 4) -> tl.tensor:\n    pass\n"
    assert check_source(BODY_HEAD.replace("BODY", "pass") + "\n@triton.jit\ndef k2(" + hints).passed


def test_a_jit_function_defined_in_a_function_or_class_is_read_like_any_other() -> None:
    inner = "\ndef make():\n    @triton.jit\n    def k3(x_ptr):\n        y = torch.relu(x_ptr)\n    return k3\n"
    assert "torch.relu inside a @triton.jit body" in check_source(BODY_HEAD.replace("BODY", "pass") + inner).message
    legal = "\nclass Q:\n    @triton.jit\n    def k3(x_ptr):\n        tl.store(x_ptr, 1.0)\n"
    assert check_source(BODY_HEAD.replace("BODY", "pass") + legal).passed


# -- candidate Python that Triton runs inside a launch (the CPU interpreter counts it as kernel time) ------
LAUNCH_GRID = "    relu_kernel[grid](x, x, n)"
LAUNCH = HEAD.replace("class ModelNew", "def launch(x, n):\n    LAUNCH_LINE\n\n\nclass ModelNew")


@pytest.mark.parametrize(
    "line, legal",
    [
        ("relu_kernel[lambda meta: (triton.cdiv(n, meta['BLOCK']),)](x, x, n, BLOCK=64)", True),
        (
            "grid = lambda meta: (triton.cdiv(x.numel(), meta['BLOCK']), max(1, n // 2))\n"
            "    relu_kernel[grid](x, x, n)",
            True,
        ),
        ("grid = (triton.cdiv(n, 64),)\n    relu_kernel[grid](x, x, n, BLOCK=64)", True),
        ("relu_kernel[lambda meta: (torch.matmul(x, x, out=x), 1)[1:]](x, x, n, BLOCK=64)", False),
        ("relu_kernel[lambda meta: (int((x @ x)[0, 0]),)](x, x, n, BLOCK=64)", False),
        ("relu_kernel[lambda meta: (x.copy_(x).numel(),)](x, x, n, BLOCK=64)", False),
        ("relu_kernel[functools.partial(max, 1)](x, x, n, BLOCK=64)", False),  # a call may return a function
        ("relu_kernel[launch](x, x, n, BLOCK=64)", False),
        ("def grid(meta):\n        m = triton.cdiv(n, meta['BLOCK'])\n        return (m,)\n" + LAUNCH_GRID, True),
        ("def grid(meta):\n        return (torch.relu(x).numel(),)\n    relu_kernel[grid](x, x, n, BLOCK=64)", False),
        ("def grid(meta):\n        y = meta['x']\n        y += x\n        return (1,)\n" + LAUNCH_GRID, False),
        ("def grid(meta):\n        meta['x'][0] = 1\n        return (1,)\n" + LAUNCH_GRID, False),
        ("relu_kernel[x.grid](x, x, n, BLOCK=64)", False),
        ("k = relu_kernel\n    k[lambda m: (1,)](x, x, n)", True),
        ("k = relu_kernel\n    k[lambda m: (torch.relu(x).numel(),)](x, x, n)", False),
        ("k = relu_kernel\n    k = print\n    k[lambda m: (1,)](x, x, n)", False),
        ("functools.partial(print, relu_kernel)", False),
        ("relu_kernel.run(x, x, n, grid=launch, warmup=False)", False),
        ("ModelNew.relu_kernel[lambda m: (torch.relu(x).numel(),)](x, x, n)", False),
    ],
)
def test_a_grid_function_is_scalar_arithmetic(line: str, legal: bool) -> None:
    result = check_source(LAUNCH.replace("LAUNCH_LINE", line))
    assert result.passed == legal, result.message


@pytest.mark.parametrize(
    "decorators, legal",
    [
        (
            "@triton.heuristics({'E': lambda args: args['n'] % 64 == 0, "
            "'P': lambda a: triton.next_power_of_2(a['n'])})",
            True,
        ),
        ("@triton.autotune(configs=[triton.Config({'B': 64}, num_warps=4)], key=['n'], reset_to_zero=['x'])", True),
        ("@triton.heuristics({'E': lambda args: torch.matmul(args['x'], args['x'], out=args['x']) is None})", False),
        ("@triton.heuristics(HEURISTICS)", False),
        ("@triton.autotune(configs=[triton.Config({'B': 64}, pre_hook=lambda a: a['x'].zero_())], key=['n'])", False),
        ("@triton.autotune(configs=[], key=['n'], do_bench=print)", False),
        ("@triton.autotune(configs=[], key=['n'], prune_configs_by={'early_config_prune': print})", False),
        ("@triton.autotune([], ['n'], None, None, None, print)", False),
    ],
)
def test_functions_triton_calls_at_launch_are_scalar_lambdas(decorators: str, legal: bool) -> None:
    src = (
        HEAD
        + "\nHEURISTICS = {'E': lambda a: 1}\n\n"
        + decorators
        + "\n@triton.jit\ndef k2(x, n, E: tl.constexpr = 0):\n    pass\n"
    )
    assert check_source(src).passed == legal, check_source(src).message


@pytest.mark.parametrize(
    "snippet, legal",
    [
        ("J = triton.jit\n@J\ndef k2(x):\n    pass", True),
        ("@triton.jit(do_not_specialize=['x'])\ndef k2(x):\n    pass", True),
        ("k2 = triton.jit(lambda x: x)", False),
        ("jit = functools.partial(triton.jit)\n@jit\ndef k2(x):\n    pass", False),
        ("k2 = triton.JITFunction(print)", False),
        ("@triton.constexpr_function\ndef c(x):\n    return x", False),
        ("triton.set_allocator(print)", False),
        ("class A(nn.Module):\n    @functools.cached_property\n    def w(self):\n        return 1", False),
    ],
)
def test_kernels_are_made_only_by_a_jit_decorator_the_gate_read(snippet: str, legal: bool) -> None:
    assert check_source(HEAD + "\n" + snippet + "\n").passed == legal


@pytest.mark.parametrize(
    "snippet",
    [
        # a kernel body runs with the module's globals: a rebound alias or jit name is another object at run time
        "class _Fake:\n    pass\ntl = _Fake()",
        "def f(tl):\n    return tl",
        "import torch.nn as tl",
        "relu_kernel = None",
        # a context left open by a generator stays on after the call (autocast: eager ops in bf16)
        "def g():\n    with torch.no_grad():\n        yield 1",
        "class A(nn.Module):\n    def forward(self, x):\n        with torch.autocast('cpu'):\n            return x",
    ],
)
def test_names_kernels_read_are_bound_once_and_no_context_is_left_open(snippet: str) -> None:
    assert check_source(HEAD + "\n" + snippet + "\n").kind == "forbidden", snippet


def test_a_repeated_import_of_the_same_module_stays_legal() -> None:
    assert check_source(HEAD + "\nimport torch\nimport torch.nn as nn\n\ndef f():\n    import triton\n").passed
