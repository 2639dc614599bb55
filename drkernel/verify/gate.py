"""Static gate: an allow-list of what a kernel source may touch, checked on the AST before anything runs.

A reward-seeking policy searches for whatever the verifier lets through, so the gate names what a
Triton kernel module needs (torch, triton, a few pure stdlib modules) and rejects the rest: dynamic
imports and attribute access by computed name, dunder walks, frame and garbage-collector
introspection, global hooks, torch function/dispatch modes, profilers, streams and graphs, and
assignment into anything the candidate did not create. A `@triton.jit` body may only call Triton
operations, the builtins Triton's frontend implements, and other jit functions of the same module,
so plain Python (which the CPU interpreter would count as kernel time) cannot hide in a kernel.

Names alone do not close the allow-list: allowed modules re-export whole stdlib modules and loaders
(`torch.builtins.exec`, `typing.sys.modules`, `torch.ops.import_module`; red-team finding 1). So
every dotted path rooted at an imported module is also walked over the real objects (the allowed
modules imported here, once, without running attribute hooks): a module it reaches must be allowed,
and a function or class must not be a denied API, a code-running builtin, or come from a module off
the allow-list. A name bound from a call, subscript or attribute read holds an object the candidate
fetched, not made: storing into its attributes is monkey-patching.
It is one layer: the process sandbox and the trusted-side checks hold without it. It runs in the
verifier's own process (a rejected source costs no child process), which therefore imports the
allowed modules (torch, Triton) on the first check.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import inspect
import re
import sys
import threading
import types
from dataclasses import dataclass, field
from typing import Any

# Modules a candidate may import (exactly these, or as `from <module> import <name>`; the imported
# name is then checked like an attribute of the module).
ALLOWED_MODULES = frozenset(
    {
        "torch",
        "torch.nn",
        "torch.nn.functional",
        "torch.nn.init",
        "torch.nn.parameter",
        "torch.autograd",
        "torch.cuda",
        "torch.npu",
        "torch_npu",  # honest Ascend kernels import it to register the device; its APIs meet the same rules
        "triton",
        "triton.language",
        "triton.language.math",
        "triton.language.extra",
        "triton.language.extra.libdevice",
        "triton.language.extra.cuda",
        "triton.language.extra.cuda.libdevice",
        "triton.language.extra.hip",
        "triton.language.extra.hip.libdevice",
        "torch.utils.checkpoint",
        "math",
        "functools",
        "typing",
        "__future__",
        "itertools",
        "collections",
        "collections.abc",
        "random",
    }
)
# Dotted paths (and everything under them) that stay closed although their root module is allowed.
DENIED_PATHS = (
    "torch.compile",
    "torch.jit",
    "torch.utils",
    "torch.hub",
    "torch.library",
    "torch.load",
    "torch.save",
    "torch.multiprocessing",
    "torch.distributed",
    "torch.autograd.profiler",
    "torch.autograd.graph",
    "torch.package",
    "torch.export",
    "torch.fx",
    "torch.onnx",
    "torch.testing",
    "torch.random",
    "torch.seed",
    "torch.overrides",
    "torch.profiler",
    "torch.classes",
    "torch.cuda.memory",
    "torch.cuda.tunable",  # TunableOp reads and writes result files at any path (set_filename, read_file, ...)
    "torch.cuda.gds",  # cuFile: GdsFile opens any path
    "torch.cuda.list_gpu_processes",  # every process on the device: the pids of the judge and reference runner
    "torch.npu.memory",
    "torch_npu.npu.memory",
    "torch_npu.utils",
    "torch_npu.contrib",
    "torch_npu.dynamo",
    "torch_npu.distributed",
    "torch_npu.multiprocessing",
    "torch_npu.testing",
    "triton.knobs",
    "triton.runtime",
    "triton.compiler",
    "triton.compile",
    "triton.testing",
    "triton.tools",
    "triton.backends",
    "triton.profiler",
    "triton.language.extra.libdevice.inline_asm_elementwise",
    "torch.serialization",
    "torch.from_file",
    "torch.ops.import_module",
    "torch.ops.load_library",
    "torch.storage",
    "torch.UntypedStorage.from_file",
    "torch.TypedStorage.from_file",
)
OPEN_UNDER_DENIED = ("torch.utils.checkpoint.", "torch.utils.checkpoint")  # recomputation only
# Attribute names closed on any object: streams and graphs (work the harness's events do not see,
# replayed results), hook and mode machinery, profilers, seeds, native loading, frame objects.
DENIED_ATTRS = frozenset(
    {
        "Stream",
        "ExternalStream",
        "StreamContext",
        "stream",
        "set_stream",
        "wait_stream",
        "CUDAGraph",
        "graph",
        "graphs",
        "make_graphed_callables",
        "TorchFunctionMode",
        "TorchDispatchMode",
        "overrides",
        "profiler",
        "record_function",
        "cpp_extension",
        "load_inline",
        "load_library",
        "knobs",
        "launch_enter_hook",
        "launch_exit_hook",
        "initial_seed",
        "get_rng_state",
        "set_rng_state",
        "manual_seed",
        "settrace",
        "setprofile",
        "f_back",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_code",
        "tb_frame",
        "tb_next",
        "gi_frame",
        "gi_code",
        "cr_frame",
        "cr_code",
        "ag_frame",
        "ag_code",
        "inline_asm_elementwise",
        "get_device_module",
        "get_type_hints",
        "get_args",
        "get_origin",
        "mro",
        # files and loaders on any object (`ndarray.tofile`, `Storage.from_file`, `torch.ops.import_module`)
        "tofile",
        "fromfile",
        "from_file",
        "dump",
        "dumps",
        "save",
        "import_module",
        "ctypes",
        # the candidate's device-memory cap (candidate_process) is the harness's to set
        "set_per_process_memory_fraction",
    }
)
# Private library helpers honest PyTorch code calls (nn.Linear's own init recipe, conv argument helpers).
ALLOWED_PRIVATE = frozenset(
    {
        "torch.nn.init._calculate_fan_in_and_fan_out",
        "torch.nn.init._calculate_correct_fan",
        "torch.nn.modules.utils._pair",
        "torch.nn.modules.utils._single",
        "torch.nn.modules.utils._triple",
        "torch.nn.modules.utils._ntuple",
    }
)
# Names of torch/triton submodules: module objects may not travel as values (see _value_context).
MODULE_NAMES = frozenset(
    {
        "torch",
        "triton",
        "nn",
        "functional",
        "init",
        "cuda",
        "npu",
        "xpu",
        "mps",
        "cpu",
        "backends",
        "cudnn",
        "matmul",
        "mkldnn",
        "linalg",
        "fft",
        "special",
        "sparse",
        "autograd",
        "utils",
        "checkpoint",
        "ops",
        "amp",
        "library",
        "overrides",
        "distributed",
        "multiprocessing",
        "jit",
        "onnx",
        "fx",
        "random",
        "testing",
        "hub",
        "profiler",
        "futures",
        "masked",
        "nested",
        "quantization",
        "ao",
        "export",
        "func",
        "compiler",
        "storage",
        "serialization",
        "types",
        "modules",
        "module",
        "parameter",
        "language",
        "extra",
        "libdevice",
        "math",
        "core",
        "runtime",
        "knobs",
        "tools",
        "standard",
        "semantic",
        "functools",
        "itertools",
        "typing",
        "collections",
        "aten",
        "prims",
        "hip",
        "nvidia",
    }
)
HOOK_ATTR = re.compile(r"register_.*hook|register_module_")
# Packages whose submodules an attribute path may reach (the path rules above still apply to them).
REACHABLE_PACKAGES = ("torch", "triton")
# Modules a function or class reached through an allowed module may be defined in (measured over every
# public attribute of the allowed modules). Not here, so rejected: os, sys, _thread, importlib and its
# frozen loader (`triton.language.extra.module_from_spec`), types (FunctionType builds code), ...
CALLABLE_HOMES = frozenset(
    {
        "torch",
        "triton",
        "typing",
        "typing_extensions",
        "math",
        "collections",
        "_collections",
        "_collections_abc",
        "random",
        "_random",
        "itertools",
        "functools",
        "_functools",
        "builtins",
        "abc",
        "_abc",
        "reprlib",
        "weakref",
        "numbers",
        "enum",
        "dataclasses",
        "operator",
        "_operator",
    }
)
# Builtins that run code, reach namespaces or files, read/write attributes by name or create classes,
# however they are reached (a module attribute bound to one of these hides it from the name rules).
DANGEROUS_BUILTINS = (
    "eval",
    "exec",
    "compile",
    "open",
    "globals",
    "locals",
    "vars",
    "breakpoint",
    "__import__",
    "__build_class__",
    "getattr",
    "setattr",
    "delattr",
    "hasattr",
    "type",
    "input",
)
# Builtins that evaluate code, reach namespaces or files, or read/write attributes by computed name.
DENIED_BUILTINS = frozenset(
    {"eval", "exec", "compile", "open", "globals", "locals", "vars", "breakpoint", "__import__", "__build_class__"}
)
ATTR_BUILTINS = frozenset({"getattr", "setattr", "delattr", "hasattr"})
# What Triton's code generator resolves inside a jit body (CodeGenerator.builtin_namespace, Triton 3.x).
JIT_BUILTINS = frozenset(
    {"len", "list", "range", "float", "int", "isinstance", "getattr", "hasattr", "print", "min", "max"}
)
# Methods of triton.language.tensor and tensor descriptors: the only calls on a local value in a jit body.
TENSOR_METHODS = frozenset(
    {
        "abs",
        "advance",
        "argmax",
        "argmin",
        "associative_scan",
        "atomic_add",
        "atomic_and",
        "atomic_cas",
        "atomic_load",
        "atomic_max",
        "atomic_min",
        "atomic_or",
        "atomic_poll",
        "atomic_store",
        "atomic_xchg",
        "atomic_xor",
        "broadcast_to",
        "cast",
        "cdiv",
        "ceil",
        "cos",
        "cumprod",
        "cumsum",
        "erf",
        "exp",
        "exp2",
        "expand_dims",
        "flip",
        "floor",
        "gather",
        "histogram",
        "item",
        "log",
        "log2",
        "logical_and",
        "logical_or",
        "max",
        "min",
        "permute",
        "ravel",
        "reduce",
        "reduce_or",
        "reshape",
        "rsqrt",
        "sigmoid",
        "sin",
        "softmax",
        "sort",
        "split",
        "sqrt",
        "sqrt_rn",
        "store",
        "load",
        "scatter",
        "sum",
        "to",
        "trans",
        "view",
        "xor_sum",
    }
)
JIT_HOST_CALLS = frozenset({"triton.cdiv", "triton.next_power_of_2"})
JIT_SCALAR_MODULES = ("math.",)  # compile-time arithmetic on constexpr scalars (Triton resolves module globals)
# Kernel names that imitate library kernels as the profiler shows them (cuBLAS/cuDNN/CUTLASS GEMMs,
# Inductor, NCCL): a candidate kernel so named could claim a library kernel's time by name.
# Only identifiers can collide exactly; ATen's templated names (`void at::native::...<...>`) cannot.
LIBRARY_KERNEL_NAME = re.compile(
    r"^(nvjet_|sm\d+_|ampere_|volta_|turing_|hopper_|blackwell_|cutlass|xmma|"
    r"triton_(poi|red|per|tem)_|ncclDevKernel)"
)
GLOBAL_CLASSES = frozenset(
    {
        "torch.Tensor",
        "torch.nn.Module",
        "torch.nn.Parameter",
        "torch.autograd.Function",
        "torch.nn.modules.Module",
        "torch.nn.modules.module.Module",
        "triton.JITFunction",
        "triton.language.tensor",
    }
)
TENSOR_CLASSES = frozenset({"torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase"})
# Receivers that are the candidate's own module/function objects (private attributes allowed; no rebinding).
OWN_RECEIVERS = frozenset({"self", "ctx"})
FRESH_BUILTINS = frozenset({"list", "dict", "set", "tuple", "object", "int", "float", "str", "bool", "range"})
DUNDER_DEFS = frozenset({"__init__"})  # the only dunder a measured honest corpus defines or calls


@dataclass
class GateResult:
    """What the gate decided; `kind` is an ErrorKind when it rejected the source."""

    passed: bool
    kind: str | None = None
    message: str = ""
    violations: list[str] = field(default_factory=list)
    triton_kernels: list[str] = field(default_factory=list)


def _dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


def _safe_computed_name(node: ast.AST) -> bool:
    """An f-string or `"lit" + x` whose literal head starts with a letter can never name a dunder or
    private attribute: `getattr(lstm, f"weight_ih_l{i}")` is how PyTorch code walks numbered layers."""
    head: ast.AST | None = node
    while isinstance(head, ast.BinOp) and isinstance(head.op, ast.Add):
        head = head.left
    if isinstance(head, ast.JoinedStr):
        head = head.values[0] if head.values else None
    return isinstance(head, ast.Constant) and isinstance(head.value, str) and head.value[:1].isalpha()


def _import_alias(node: ast.Import | ast.ImportFrom, alias: ast.alias) -> tuple[str, str]:
    """(bound name, dotted path) of one import binding."""
    if isinstance(node, ast.ImportFrom):
        return alias.asname or alias.name, f"{node.module}.{alias.name}"
    head = alias.name.partition(".")[0]
    return (alias.asname, alias.name) if alias.asname else (head, head)


class _Scanner(ast.NodeVisitor):
    def __init__(self, tree: ast.Module) -> None:
        self.aliases: dict[str, str] = {}  # name -> dotted module/object path it stands for
        self.parents: dict[int, ast.AST] = {}
        self.classes: set[str] = set()
        functions = []
        for parent in ast.walk(tree):  # one pass: imports (used before their line is reached), defs, parents
            for child in ast.iter_child_nodes(parent):
                self.parents[id(child)] = parent
            if isinstance(parent, ast.Import) or (isinstance(parent, ast.ImportFrom) and parent.module):
                self.aliases.update(_import_alias(parent, a) for a in parent.names)
            elif isinstance(parent, ast.ClassDef):
                self.classes.add(parent.name)
            elif isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append(parent)
        self.import_aliases = dict(self.aliases)
        self.jit_names = {f.name for f in functions if self._jit_decorated(f)}
        self.fetched = self._fetched_names(tree)
        self.violations: list[str] = []
        self.kernels: list[str] = []
        self.type_values: set[str] = set()  # names bound to a type(...) result
        self.ok_nodes: set[int] = set()  # Name/Attribute nodes already judged in their call context
        self.jit_locals: set[str] | None = None  # set while inside a jit body

    # ------------------------------------------------------------------ helpers
    def _fetched_names(self, tree: ast.Module) -> set[str]:
        """Names bound (anywhere: scopes are not told apart, which only over-approximates) to an object
        the candidate fetched rather than made: a call that is not a class construction, an item, an
        attribute of something other than its own `self`/`ctx`/classes, or another such name; loop and
        `with` targets over one. Iterated to a fixed point, since a name may be bound before it is read."""
        bindings: list[tuple[ast.AST, ast.AST]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                bindings += [(t, node.value) for t in node.targets]
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                bindings.append((node.target, node.value))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                bindings.append((node.target, node.iter))
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                bindings += [(i.optional_vars, i.context_expr) for i in node.items if i.optional_vars is not None]
        fetched: set[str] = set()
        changed = True
        while changed:
            changed = False
            for target, value in bindings:
                if not self._is_fetched(value, fetched):
                    continue
                for name in _bound_names(target):
                    if name not in fetched:
                        fetched.add(name)
                        changed = True
        return fetched

    def _is_fetched(self, value: ast.AST, fetched: set[str]) -> bool:
        if isinstance(value, ast.Name):
            return value.id in fetched
        if isinstance(value, (ast.Tuple, ast.List)):
            return any(self._is_fetched(e, fetched) for e in value.elts)
        if isinstance(value, ast.IfExp):
            return self._is_fetched(value.body, fetched) or self._is_fetched(value.orelse, fetched)
        if isinstance(value, ast.BoolOp):
            return any(self._is_fetched(v, fetched) for v in value.values)
        if isinstance(value, (ast.Starred, ast.Await, ast.NamedExpr)):
            return self._is_fetched(value.value, fetched)
        if isinstance(value, ast.Call):
            func = value.func
            if isinstance(func, ast.Name) and (func.id in self.classes or func.id in FRESH_BUILTINS):
                return False
            path = _dotted(func)
            head = path.partition(".")[0] if path else ""
            if path and head in self.import_aliases:  # a library class builds a fresh instance
                return not _REAL.is_class(self.import_aliases[head] + path[len(head) :])
            return True
        if isinstance(value, ast.Subscript):
            return True
        if isinstance(value, ast.Attribute):
            root = _root(value)
            return not (isinstance(root, ast.Name) and root.id in OWN_RECEIVERS | self.classes)
        return False

    def _flag(self, node: ast.AST, what: str) -> None:
        self.violations.append(f"line {getattr(node, 'lineno', '?')}: {what}")

    def _resolve(self, node: ast.AST) -> str | None:
        name = _dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if head not in self.aliases:
            return None
        base = self.aliases[head]
        return f"{base}.{rest}" if rest else base

    def _jit_decorated(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """Decorated with triton.jit (bare or called), however triton or jit was imported."""
        for deco in fn.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            name = _dotted(target) or ""
            head, _, rest = name.partition(".")
            base = self.import_aliases.get(head, head)
            if (f"{base}.{rest}" if rest else base) == "triton.jit":
                return True
        return False

    def _check_path(self, node: ast.AST, path: str) -> None:
        """Rules for a dotted path reached from an imported module (import, attribute, from-import): by
        its names, then by the real objects it reaches."""
        if path in ALLOWED_PRIVATE:
            return
        problem = _path_problem(path) or _REAL.reach(path)
        if problem:
            self._flag(node, problem)

    def _check_attr_name(self, node: ast.AST, attr: str, receiver: ast.AST, in_call: bool) -> None:
        """Rules for `.attr` on a value that is not a module path."""
        if _dunder(attr):
            if not (attr in DUNDER_DEFS and in_call):
                self._flag(node, f"dunder attribute .{attr}")
        elif attr.startswith("_"):
            if not (isinstance(receiver, ast.Name) and receiver.id in OWN_RECEIVERS | {"cls"} | self.classes):
                self._flag(node, f"private attribute .{attr} of another object")
        elif attr in DENIED_ATTRS or HOOK_ATTR.match(attr):
            self._flag(node, f"forbidden attribute .{attr}")

    def _attribute(self, node: ast.Attribute, in_call: bool) -> None:
        if in_call and node.attr in DUNDER_DEFS:  # `nn.Module.__init__(self)`, `super().__init__()`
            full = self._resolve(node.value)
            if full is not None:
                self._check_path(node, full)
            return
        full = self._resolve(node)
        if full is not None:
            self._check_path(node, full)
        else:
            self._check_attr_name(node, node.attr, node.value, in_call)

    def _check_store(self, target: ast.AST, node: ast.AST) -> None:
        """Assignment into an attribute or item of a module, a library class or a type(): monkey-patching.

        Module and class objects cannot travel into other names (see _check_value), so a store through
        any other local name lands in an object the candidate created."""
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._check_store(elt, node)
            return
        if isinstance(target, ast.Starred):
            self._check_store(target.value, node)
            return
        if isinstance(target, ast.Name):
            if _dunder(target.id):
                self._flag(node, f"assignment to {target.id}")
            elif target.id in OWN_RECEIVERS and self.jit_locals is None:
                self._flag(node, f"rebinding {target.id}")
            return
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            root = _root(target)
            if (
                isinstance(target, ast.Attribute)
                and isinstance(root, ast.Name)
                and root.id in self.fetched
                and root.id not in self.aliases
            ):
                self._flag(
                    node,
                    f"assignment to {ast.unparse(target)}: {root.id} holds an object fetched from "
                    f"a call, item or attribute, not one the candidate created (monkey-patching)",
                )
                return
            if isinstance(root, ast.Name) and root.id not in self.aliases and root.id not in self.type_values:
                return
            what = self._resolve(target) or ast.unparse(target)
            self._flag(node, f"assignment to {what}, not an object the candidate created (monkey-patching)")

    def _check_value(self, node: ast.AST, what: str) -> None:
        """A module, a library class or a type() result may be called, subclassed, compared, named in an
        annotation or aliased by a plain `X = ...`, never carried as a value (in a container, argument,
        return, default, class attribute), where no static rule could follow it to a monkey-patch."""
        child, parent = node, self.parents.get(id(node))
        if isinstance(parent, ast.Call) and (
            parent.func is child
            or (child in parent.args[:1] and isinstance(parent.func, ast.Name) and parent.func.id in ATTR_BUILTINS)
        ):
            return
        if isinstance(parent, (ast.Compare, ast.ExceptHandler)):
            return
        if isinstance(parent, ast.ClassDef) and child in parent.bases:
            return
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and child in parent.decorator_list:
            return
        if isinstance(parent, (ast.Assign, ast.NamedExpr, ast.AnnAssign)) and parent.value is child:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if all(isinstance(t, ast.Name) for t in targets) and not isinstance(
                self.parents.get(id(parent)), ast.ClassDef
            ):
                return
        if isinstance(parent, ast.Tuple):
            grand = self.parents.get(id(parent))
            if isinstance(grand, ast.ExceptHandler) or (
                isinstance(grand, ast.Call)
                and parent in grand.args[1:2]
                and isinstance(grand.func, ast.Name)
                and grand.func.id in {"isinstance", "issubclass"}
            ):
                return
        if (
            isinstance(parent, ast.Call)
            and child in parent.args[1:2]
            and isinstance(parent.func, ast.Name)
            and parent.func.id in {"isinstance", "issubclass"}
        ):
            return
        while parent is not None:  # inside an annotation
            if (
                (isinstance(parent, ast.arg) and parent.annotation is child)
                or (isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and parent.returns is child)
                or (isinstance(parent, ast.AnnAssign) and parent.annotation is child)
            ):
                return
            child, parent = parent, self.parents.get(id(parent))
        self._flag(node, f"{what} used as a value (only called, subclassed, compared or aliased)")

    @staticmethod
    def _module_or_class(path: str) -> bool:
        """Modules, and the classes whose patching reaches every tensor or module; other library classes
        (`norm_layer=nn.LayerNorm`) may be passed around like functions."""
        return path.rsplit(".", 1)[-1] in MODULE_NAMES or path in GLOBAL_CLASSES

    # ------------------------------------------------------------------ imports
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name not in ALLOWED_MODULES:
                self._flag(node, f"import of {alias.name} (not on the allow-list)")
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                head = alias.name.partition(".")[0]
                self.aliases[head] = head

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level or module not in ALLOWED_MODULES:
            self._flag(node, f"import from {'.' * node.level}{module} (not on the allow-list)")
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if alias.name == "*":
                self._flag(node, f"star import from {module}")
                continue
            if module != "__future__":
                self._check_path(node, full)
            self.aliases[alias.asname or alias.name] = full

    # ------------------------------------------------------------------ names and attributes
    def visit_Name(self, node: ast.Name) -> None:
        if id(node) in self.ok_nodes:
            return
        if node.id in DENIED_BUILTINS:
            self._flag(node, f"use of {node.id}")
        elif node.id in ATTR_BUILTINS:
            self._flag(node, f"{node.id} used other than as a call with a literal attribute name")
        elif node.id == "type" and isinstance(node.ctx, ast.Load):
            self._flag(node, "type used other than as type(x)")
        elif _dunder(node.id) and not (node.id == "__name__" and isinstance(node.ctx, ast.Load)):
            self._flag(node, f"dunder name {node.id}")
        elif node.id in self.aliases and isinstance(node.ctx, ast.Load):
            self._check_path(node, self.aliases[node.id])
            if self._module_or_class(self.aliases[node.id]) and not self._chain_prefix(node):
                self._check_value(node, f"module or class {self.aliases[node.id]}")
        elif node.id in self.type_values and isinstance(node.ctx, ast.Load) and not self._chain_prefix(node):
            self._check_value(node, f"type() result {node.id}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        full = self._resolve(node)
        if id(node) not in self.ok_nodes and not (full is not None and self._chain_prefix(node)):
            self._attribute(node, in_call=False)  # a module path is judged whole, at its longest chain
        if (
            full is not None
            and isinstance(node.ctx, ast.Load)
            and self._module_or_class(full)
            and not self._chain_prefix(node)
        ):
            self._check_value(node, f"module or class {full}")
        self.visit(node.value)

    def _chain_prefix(self, node: ast.AST) -> bool:
        parent = self.parents.get(id(node))
        return isinstance(parent, ast.Attribute) and parent.value is node

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in ATTR_BUILTINS:
            self.ok_nodes.add(id(func))
            self._attr_builtin(node, func.id)
        elif isinstance(func, ast.Name) and func.id == "type":
            self.ok_nodes.add(id(func))
            if len(node.args) != 1 or node.keywords:
                self._flag(node, "type() with other than one argument (class creation)")
            elif not isinstance(self.parents.get(id(node)), ast.Compare):
                self._check_value(node, "type() result")
        elif isinstance(func, ast.Attribute):
            self.ok_nodes.add(id(func))
            self._attribute(func, in_call=True)
        if self.jit_locals is not None:
            self._jit_call(node)
        self.generic_visit(node)

    def _attr_builtin(self, node: ast.Call, builtin: str) -> None:
        """getattr & co.: a literal name is judged as the attribute it names; a computed one only on self."""
        if len(node.args) < 2:
            self._flag(node, f"{builtin} without an attribute name")
            return
        obj, name = node.args[0], node.args[1]
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            synthetic = ast.copy_location(ast.Attribute(value=obj, attr=name.value, ctx=ast.Load()), node)
            self._attribute(synthetic, in_call=False)
            if builtin in {"setattr", "delattr"}:
                self._check_store(
                    ast.copy_location(ast.Attribute(value=obj, attr=name.value, ctx=ast.Store()), node), node
                )
        elif self._resolve(obj) is not None or not _safe_computed_name(name):
            self._flag(node, f"{builtin} with a computed attribute name")

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        for attr in node.kwd_attrs:  # `case C(__dict__=d)` reads the attribute by name
            self._check_attr_name(node, attr, node.cls, in_call=False)
        self.generic_visit(node)

    # ------------------------------------------------------------------ stores
    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_store(t, node)
        self._track_binding(node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_store(node.target, node)
        if node.value is not None:
            self._track_binding([node.target], node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_store(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._check_store(t, node)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._check_store(node.target, node)
        self._track_binding([node.target], node.value)
        self.generic_visit(node)

    def _track_binding(self, targets: list[ast.AST], value: ast.AST) -> None:
        """`T = torch.Tensor` makes T a module path (checked as such), `t = type(x)` a class; any other
        binding of the name drops both."""
        path = self._resolve(value)
        is_type = isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "type"
        for t in targets:
            if not isinstance(t, ast.Name):
                continue
            self.aliases.pop(t.id, None)
            self.type_values.discard(t.id)
            if path is not None:
                self.aliases[t.id] = path
            elif is_type:
                self.type_values.add(t.id)

    # ------------------------------------------------------------------ definitions
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if _dunder(node.name):
            self._flag(node, f"class named {node.name}")
        for base in node.bases:
            if (self._resolve(base) or "") in TENSOR_CLASSES:
                self._flag(node, f"class {node.name} subclasses torch.Tensor")
        for kw in node.keywords:
            self._flag(node, f"class keyword {kw.arg}= (metaclass machinery)")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if _dunder(node.name) and node.name not in DUNDER_DEFS:
            self._flag(node, f"defines {node.name}")
        if node.name not in self.jit_names or self.jit_locals is not None:
            self.generic_visit(node)
            return
        self.kernels.append(node.name)
        if LIBRARY_KERNEL_NAME.match(node.name):
            self._flag(node, f"kernel name {node.name} imitates a library kernel name")
        for deco in node.decorator_list:
            self.visit(deco)
        self.jit_locals = self._locals_of(node)
        try:
            for stmt in node.body:
                self.visit(stmt)
        finally:
            self.jit_locals = None
        self.visit(node.args)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Lambda(self, node: ast.Lambda) -> None:
        if self.jit_locals is not None:
            self._flag(node, "lambda inside a @triton.jit body")
        self.generic_visit(node)

    @staticmethod
    def _locals_of(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
        names = {a.arg for a in fn.args.args + fn.args.posonlyargs + fn.args.kwonlyargs}
        for sub in ast.walk(fn):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                names.add(sub.id)
        return names

    def _jit_call(self, node: ast.Call) -> None:
        """Inside a jit body: Triton ops, Triton's builtins, other jit functions, tensor methods on locals."""
        assert self.jit_locals is not None
        func = node.func
        path = self._resolve(func)
        if path is not None:
            if not (path.startswith(("triton.language.", *JIT_SCALAR_MODULES)) or path in JIT_HOST_CALLS):
                self._flag(node, f"call to {path} inside a @triton.jit body (only triton.language operations)")
            return
        if isinstance(func, ast.Name):
            if func.id in self.jit_names or (func.id in JIT_BUILTINS and func.id not in self.jit_locals):
                return
            self._flag(node, f"call to {func.id} inside a @triton.jit body (not a jit function or Triton builtin)")
            return
        if isinstance(func, ast.Attribute):
            receiver = _root(func.value)
            if isinstance(receiver, ast.Name) and receiver.id not in self.jit_locals and receiver is func.value:
                self._flag(node, f"call to {ast.unparse(func)} inside a @triton.jit body (a global object's method)")
            elif func.attr not in TENSOR_METHODS:
                self._flag(node, f"call to .{func.attr}() inside a @triton.jit body (not a Triton tensor method)")
            return
        self._flag(node, f"call to {ast.unparse(func)} inside a @triton.jit body")


def _path_problem(path: str) -> str | None:
    """The name rules for a dotted path: private and denied names, denied paths."""
    for part in path.split(".")[1:]:
        if part.startswith("_"):
            return f"private or dunder name {path}"
        if part in DENIED_ATTRS or HOOK_ATTR.match(part):
            return f"forbidden API {path}"
    if path.startswith(OPEN_UNDER_DENIED):
        return None
    for denied in DENIED_PATHS:
        if path == denied or path.startswith(denied + "."):
            return f"forbidden API {path}"
    return None


class _RealObjects:
    """The allowed modules as loaded objects, to follow attribute paths to what they really reach.

    Attributes are read with inspect.getattr_static: no module `__getattr__`, descriptor or property
    of a library runs for a candidate's path, and a lazily loaded name the walk cannot see leaves the
    name rules to judge it. Built once per process, on first use (importing torch takes seconds)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roots: dict[str, Any] | None = None
        self._denied: dict[int, str] = {}
        self._keep: list[Any] = []  # holds the denied objects, so their ids stay theirs
        self._seen: dict[str, str | None] = {}

    def _load(self) -> dict[str, Any]:
        with self._lock:
            if self._roots is None:
                for name in sorted(ALLOWED_MODULES - {"__future__"}):
                    try:
                        importlib.import_module(name)
                    except Exception:  # e.g. torch.npu without torch_npu: names judge it
                        continue
                roots = {n.partition(".")[0] for n in ALLOWED_MODULES - {"__future__"}}
                found = {n: sys.modules[n] for n in roots if n in sys.modules}
                for name in DANGEROUS_BUILTINS:
                    self._deny(builtins.__dict__.get(name), f"builtin {name}")
                for path in DENIED_PATHS:
                    self._deny(self._static(found, path), f"forbidden API {path}")
                self._roots = found
            return self._roots

    def _deny(self, obj: Any, what: str) -> None:
        if obj is not None and not isinstance(obj, types.ModuleType) and (callable(obj) or isinstance(obj, type)):
            self._keep.append(obj)
            self._denied.setdefault(id(obj), what)

    @staticmethod
    def _static(roots: dict[str, Any], path: str) -> Any:
        head, *rest = path.split(".")
        obj = roots.get(head)
        try:
            for part in rest:
                obj = _unwrap(inspect.getattr_static(obj, part))
        except Exception:  # not there in this install
            return None
        return obj

    def is_class(self, path: str) -> bool:
        return isinstance(self._static(self._load(), path), type)

    def reach(self, path: str) -> str | None:
        """What is wrong with the first thing `path` reaches, if anything (memoised: kernels repeat paths)."""
        if path not in self._seen:
            if len(self._seen) > 100_000:
                self._seen.clear()
            self._seen[path] = self._walk(path)
        return self._seen[path]

    def _walk(self, path: str) -> str | None:
        roots = self._load()
        head, *rest = path.split(".")
        obj = roots.get(head)
        if obj is None:
            return None
        real = head
        for i, part in enumerate(rest, 2):
            here = ".".join(path.split(".")[:i])
            try:
                obj = _unwrap(inspect.getattr_static(obj, part))
            except Exception:  # absent, or only a hook could produce it
                return self._unloaded_submodule(obj, part, here)
            real = obj.__name__ if isinstance(obj, types.ModuleType) else f"{real}.{part}"
            problem = self._object_problem(obj, here)
            if problem:
                return problem
        return _path_problem(real) if real != path else None

    def _unloaded_submodule(self, obj: Any, part: str, here: str) -> str | None:
        """A submodule not imported here yet (it may be in the candidate's process): judged by its name."""
        if not (isinstance(obj, types.ModuleType) and isinstance(obj.__dict__.get("__path__"), (list, tuple))):
            return None
        name = f"{obj.__name__}.{part}"
        try:
            spec = importlib.util.find_spec(name)
        except Exception:  # not a submodule
            return None
        if spec is None:
            return None
        return _module_problem(name, here) or _path_problem(name)

    def _object_problem(self, obj: Any, here: str) -> str | None:
        if isinstance(obj, types.ModuleType):
            name = obj.__name__ if isinstance(obj.__name__, str) else "?"
            problem = _module_problem(name, here)
            if problem is None and not any(o.startswith(name + ".") for o in OPEN_UNDER_DENIED):
                problem = _path_problem(name)
            return problem
        denied = self._denied.get(id(obj))
        if denied is not None:
            return f"{here} is {denied}"
        if callable(obj) or isinstance(obj, type):
            try:
                home = obj.__module__
            except Exception:  # no home to judge
                return None
            if isinstance(home, str) and home.partition(".")[0] not in CALLABLE_HOMES:
                return f"{here} is defined in {home} (not on the allow-list)"
        return None


def _bound_names(target: ast.AST) -> list[str]:
    """Names a binding target rebinds (not those inside `a.b = ` or `a[i] = `, which store into a)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _bound_names(elt)]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    return []


def _unwrap(obj: Any) -> Any:
    return obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj


def _module_problem(name: str, here: str) -> str | None:
    if name in ALLOWED_MODULES or name.partition(".")[0] in REACHABLE_PACKAGES:
        return None
    return f"{here} is the module {name} (not on the allow-list)"


_REAL = _RealObjects()


def _line_of(violation: str) -> int:
    head = violation.split(":", 1)[0].removeprefix("line ")
    return int(head) if head.isdigit() else 0


def check_source(source: str, require_triton: bool = True) -> GateResult:
    """Parse and scan a candidate; every violation is listed with its line, the first five in the message."""
    try:
        tree = ast.parse(source, filename="candidate.py")
    except SyntaxError as e:
        return GateResult(False, "syntax", f"SyntaxError: {e.msg} (line {e.lineno})")
    except ValueError as e:  # e.g. null bytes in the source
        return GateResult(False, "syntax", f"unparsable source: {e}")
    except (RecursionError, MemoryError):
        return GateResult(False, "syntax", "source nested too deeply to parse")
    try:
        scanner = _Scanner(tree)
        scanner.visit(tree)
    except RecursionError:
        return GateResult(False, "forbidden", "source nested too deeply to check")
    if scanner.violations:
        scanner.violations = sorted(dict.fromkeys(scanner.violations), key=_line_of)
        shown = "; ".join(scanner.violations[:5])
        more = f" (+{len(scanner.violations) - 5} more)" if len(scanner.violations) > 5 else ""
        return GateResult(
            False, "forbidden", f"forbidden constructs: {shown}{more}", scanner.violations, scanner.kernels
        )
    if require_triton and not scanner.kernels:
        return GateResult(False, "no_triton", "no @triton.jit kernel in the candidate", [], [])
    return GateResult(True, triton_kernels=scanner.kernels)
