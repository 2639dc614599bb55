"""The rules for a `@triton.jit` function: its body is the Triton language and nothing else.

The CPU interpreter runs a kernel body as plain Python, inside the launch the harness times and, in the
trusted replay, in a trusted process. So a body may name only its locals, the file's other jit functions,
the file's literal constants, `triton.language` and `math` names, Triton's frontend builtins and
`triton.cdiv`/`next_power_of_2`; read only a Triton value's own attributes and methods; hand
`tl.reduce`/`tl.associative_scan`/`tl.map_elementwise` only one of the file's jit functions. Its signature
carries no expression of the candidate's: annotations are absent or exactly `tl.constexpr`, defaults are
literals, so the replay can rebuild it (drkernel.verify.cost_model.replay) without evaluating anything of the candidate.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from drkernel.verify.static.gate_objects import MISSING, REAL
from drkernel.verify.static.gate_policy import (
    JIT_BUILTINS,
    JIT_FUNCTION_SLOTS,
    JIT_HOST_CALLS,
    JIT_METHOD_SLOTS,
    JIT_MODULES,
    JIT_VALUE_ATTRS,
    TENSOR_METHODS,
)

JIT_STATEMENTS = (
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.Expr,
    ast.If,
    ast.For,
    ast.While,
    ast.Return,
    ast.Pass,
    ast.Break,
    ast.Continue,
    ast.Assert,
)
JIT_EXPRESSIONS = (
    ast.Name,
    ast.Attribute,
    ast.Call,
    ast.Constant,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Subscript,
    ast.Slice,
    ast.Tuple,
    ast.List,
    ast.Starred,
)
CONSTEXPR = "triton.language.core.constexpr"
TYPE_HINT_BUILTINS = frozenset({"int", "float", "bool", "str"})


def literal(node: ast.AST | None) -> bool:
    """A number, string, bool or None, possibly signed: what a jit default or a kernel constant may be."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
        return isinstance(node, ast.Constant) and type(node.value) in (int, float)
    return isinstance(node, ast.Constant) and type(node.value) in (int, float, bool, str, type(None))


def object_path(path: str) -> str | None:
    """`module.qualname` of the real object a path reaches, to compare with Triton's own (aliases differ)."""
    obj = REAL.get(path)
    if obj is MISSING:
        return None
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    return f"{module}.{name}" if isinstance(module, str) and isinstance(name, str) else None


def is_constexpr_annotation(node: ast.AST, resolve: Callable[[ast.AST], str | None]) -> bool:
    path = resolve(node)
    return path is not None and object_path(path) == CONSTEXPR


def jit_object_problem(path: str) -> str | None:
    """A path in a kernel body must stay in Triton's language or math and end at one of their objects."""
    if path in JIT_HOST_CALLS:
        return None
    parts = path.split(".")
    inside = False  # past the package path, in Triton's language or math
    for i in range(1, len(parts)):
        prefix = ".".join(parts[:i])
        module = REAL.kind(prefix) == "module" and getattr(REAL.get(prefix), "__name__", None) in JIT_MODULES
        if inside and not module:
            return f"{path} inside a @triton.jit body (only triton.language and math names)"
        inside = inside or module
    if not inside and len(parts) > 1 and parts[0] != "math":
        return f"{path} inside a @triton.jit body (only triton.language and math names)"
    kind = REAL.kind(path)
    if kind == "data":
        return None
    home = REAL.home(path)
    if (
        kind in ("callable", "class")
        and isinstance(home, str)
        and (home == "math" or home.startswith("triton.language"))
    ):
        return None
    return f"{path} inside a @triton.jit body (not a Triton language object)"


class KernelRules:
    """Checks one jit function; `flag` records a violation, `resolve` maps a name chain to its import path."""

    def __init__(
        self,
        resolve: Callable[[ast.AST], str | None],
        flag: Callable[[ast.AST, str], None],
        jit_names: set[str],
        constants: set[str],
    ) -> None:
        self.resolve, self.flag, self.jit_names, self.constants = resolve, flag, jit_names, constants

    def check(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """One jit function, wherever it is defined (a def inside a function or class too: Triton runs it with
        the module's globals all the same, and the replay rebuilds it at module level)."""
        if isinstance(fn, ast.AsyncFunctionDef):
            self.flag(fn, f"@triton.jit function {fn.name} is async")
        self._signature(fn)
        self.locals = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
        for sub in ast.walk(ast.Module(body=fn.body, type_ignores=[])):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                self.locals.add(sub.id)
        for stmt in fn.body:
            for node in ast.walk(stmt):
                self._node(node)

    def _signature(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        args = fn.args
        if args.vararg or args.kwarg:
            self.flag(fn, f"@triton.jit function {fn.name} takes *args or **kwargs")
        if fn.returns is not None and not self._type_hint(fn.returns):
            self.flag(fn, f"return annotation of {fn.name} is not a Triton type or int/float/bool/str")
        for a in args.posonlyargs + args.args + args.kwonlyargs:
            if a.annotation is not None and not is_constexpr_annotation(a.annotation, self.resolve):
                if not self._type_hint(a.annotation):
                    self.flag(
                        a, f"annotation of {fn.name}'s {a.arg} is not tl.constexpr, a Triton type or int/float/..."
                    )
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            if not literal(d):
                self.flag(d, f"default of a @triton.jit parameter is not a literal: {ast.unparse(d)[:60]}")

    def _type_hint(self, node: ast.AST) -> bool:
        """A type hint honest kernels write (`n: tl.int32`, `x: int`, `-> tl.tensor`): only the candidate's own
        process evaluates it (the replay keeps tl.constexpr marks alone), and it names no code."""
        if isinstance(node, ast.Name) and node.id in TYPE_HINT_BUILTINS and self.resolve(node) is None:
            return True
        path = self.resolve(node)
        if path is None or REAL.kind(path) not in ("data", "class"):
            return False
        home = REAL.home(path)
        return isinstance(home, str) and home.startswith("triton.language")

    def _node(self, node: ast.AST) -> None:
        if isinstance(node, ast.stmt) and not isinstance(node, JIT_STATEMENTS):
            self.flag(node, f"{type(node).__name__} statement inside a @triton.jit body")
        elif isinstance(node, ast.expr) and not isinstance(node, JIT_EXPRESSIONS):
            what = "lambda" if isinstance(node, ast.Lambda) else type(node).__name__
            self.flag(node, f"{what} inside a @triton.jit body")
        elif isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
            self.flag(node, "@ inside a @triton.jit body (Triton has tl.dot; on anything else it is not Triton)")
        elif isinstance(node, ast.Name):
            self._name(node)
        elif isinstance(node, ast.Attribute):
            self._attribute(node)
        elif isinstance(node, ast.Call):
            self._call(node)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and self._jit_name(node.value.id):
            self.flag(node, f"launch of {node.value.id} inside a @triton.jit body")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, (ast.Attribute, ast.Subscript)) and isinstance(sub.ctx, ast.Store):
                        self.flag(node, f"assignment to {ast.unparse(sub)} inside a @triton.jit body")

    def _jit_name(self, name: str) -> bool:
        return name in self.jit_names and name not in self.locals

    def _name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load) or node.id in self.locals or node.id in self.jit_names:
            return
        if node.id in self.constants or node.id in JIT_BUILTINS:
            return
        path = self.resolve(node)
        if path is None:
            self.flag(node, f"name {node.id} inside a @triton.jit body (not a local, jit function or literal constant)")
        elif self._chain_head(node) is None:
            problem = jit_object_problem(path)
            if problem:
                self.flag(node, problem)

    def _chain_head(self, node: ast.AST) -> ast.AST | None:
        """The longest attribute chain `node` is the head of, when it is not the whole chain."""
        return getattr(node, "_drk_parent_attr", None)

    def _attribute(self, node: ast.Attribute) -> None:
        root = node.value
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id not in self.locals and self.resolve(root) is not None:
            if not getattr(node, "_drk_inner", False):  # a chain is judged whole, at its outermost link
                path = self.resolve(node)
                problem = jit_object_problem(path) if path else f"{ast.unparse(node)} inside a @triton.jit body"
                if problem:
                    self.flag(node, problem)
            return
        if isinstance(root, ast.Name) and self._jit_name(root.id):
            self.flag(node, f"attribute of the jit function {root.id} inside a @triton.jit body")
        elif node.attr not in JIT_VALUE_ATTRS and node.attr not in TENSOR_METHODS:
            self.flag(node, f".{node.attr} inside a @triton.jit body (not a Triton value's attribute)")

    def _call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            if func.id in self.locals:
                self.flag(node, f"call to the local {func.id} inside a @triton.jit body")
            elif not (self._jit_name(func.id) or func.id in JIT_BUILTINS or self.resolve(func) is not None):
                self.flag(node, f"call to {func.id} inside a @triton.jit body (not a jit function or Triton builtin)")
        elif not isinstance(func, ast.Attribute):
            self.flag(node, f"call to {ast.unparse(func)[:60]} inside a @triton.jit body")
        slot = None
        path = self.resolve(func)
        if path is not None:
            slot = JIT_FUNCTION_SLOTS.get(object_path(path) or "")
        elif isinstance(func, ast.Attribute) and func.attr in JIT_METHOD_SLOTS:
            slot = JIT_METHOD_SLOTS[func.attr]
        if slot is not None:
            position, keyword = slot
            given = [k.value for k in node.keywords if k.arg == keyword]
            given += node.args[position : position + 1]
            if not given:
                self.flag(node, f"{ast.unparse(func)} without a {keyword} inside a @triton.jit body")
            for fn in given:
                if not (isinstance(fn, ast.Name) and self._jit_name(fn.id)):
                    self.flag(node, f"{keyword} of {ast.unparse(func)} is not one of the file's @triton.jit functions")


def mark_chains(tree: ast.AST) -> None:
    """Marks each inner link of an attribute chain, so a chain is judged once, whole, at its outermost link."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Attribute, ast.Name)):
            node.value._drk_inner = True  # type: ignore[attr-defined]
            node.value._drk_parent_attr = node  # type: ignore[attr-defined]
