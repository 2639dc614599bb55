"""Static gate: an allow-list of what a kernel source may touch, checked on the AST before anything runs.

A reward-seeking policy searches for whatever the verifier lets through, so the gate names what a
Triton kernel module needs (torch, triton, a few pure stdlib modules; gate_policy) and rejects the rest:
dynamic imports, dunder walks, frame and garbage-collector introspection, global hooks, torch
function/dispatch modes, profilers, streams and graphs, process-wide numerics switches, and assignment
into anything the candidate did not create.

It decides on real objects, not on spellings (issue 34): every name and attribute chain rooted at an
import is followed to the object it reaches (gate_objects), so a module is refused as a value wherever it
would travel (a tuple, an argument, a default, a lambda, a walrus), whatever its name; a denied API is
refused however it is reached. An attribute named at run time (getattr & co. with a built string) is
allowed only on the candidate's own objects (self, cls, its classes and what hangs off self), and only
when its literal head starts with a letter and cannot grow into a denied name. A `@triton.jit` body is
the Triton language only (gate_kernel); outside them a kernel is only launched, with scalar grids and hooks
(gate_launches). A name bound from a call, subscript or attribute read holds an object the candidate fetched,
not made: storing into its attributes is monkey-patching (what the module binds is read first: gate_bindings).
It is one layer: the process sandbox and the trusted-side checks hold without it. It runs in the
verifier's own process (a rejected source costs no child process), which therefore imports the
allowed modules (torch, Triton) on the first check.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from drkernel.verify.static.gate_bindings import ModuleBindings, binding_counts, chain_root, import_alias
from drkernel.verify.static.gate_kernel import KernelRules, mark_chains, object_path
from drkernel.verify.static.gate_launches import LaunchRules
from drkernel.verify.static.gate_objects import REAL, path_problem
from drkernel.verify.static.gate_policy import (
    ALLOWED_MODULES,
    ALLOWED_PRIVATE,
    ATTR_BUILTINS,
    DENIED_ATTR_PATTERN,
    DENIED_ATTRS,
    DENIED_BUILTINS,
    DENIED_PREFIXES,
    DUNDER_DEFS,
    GLOBAL_CLASSES,
    LAUNCH_HOOKS,
    LIBRARY_KERNEL_NAME,
    OWN_RECEIVERS,
    PLAIN_CALLS,
    REFUSED_NAMES,
    SAFE_BUILTINS,
    TENSOR_CLASSES,
    TENSOR_PROTOCOL,
)


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


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


JIT_DECORATOR = "triton.runtime.jit.jit"
JIT_OPTIONS = frozenset({"do_not_specialize", "do_not_specialize_on_alignment", "debug", "noinline"})


def _literal(node: ast.AST) -> bool:
    """A constant, or a tuple/list of constants."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(isinstance(e, ast.Constant) for e in node.elts)
    return isinstance(node, ast.Constant)


BUILTIN_VALUE_TYPES = frozenset(
    {"tuple", "list", "dict", "set", "frozenset", "int", "float", "complex", "str", "bytes"}
)


def _computed_name_problem(node: ast.AST, own_names: set[str] = frozenset()) -> str | None:
    """An f-string or `"lit" + x` whose literal head starts with a letter can never name a dunder or
    private attribute (`getattr(lstm, f"weight_ih_l{i}")` is how PyTorch code walks numbered layers); the
    head must also not be the start of a denied name, which the rest could complete ("to" + "file")."""
    head: ast.AST | None = node
    while isinstance(head, ast.BinOp) and isinstance(head.op, ast.Add):
        head = head.left
    if isinstance(head, ast.JoinedStr):
        head = head.values[0] if head.values else None
    if not (isinstance(head, ast.Constant) and isinstance(head.value, str) and head.value[:1].isalpha()):
        return "a computed attribute name without a literal head that starts with a letter"
    text = head.value
    for denied in (*DENIED_ATTRS, *DENIED_PREFIXES, *TENSOR_PROTOCOL, *own_names):
        if denied.startswith(text) or text.startswith(denied) or DENIED_ATTR_PATTERN.match(text):
            return f"a computed attribute name starting {text!r}, which could spell the denied {denied!r}"
    return None


class _Scanner(ModuleBindings, LaunchRules, ast.NodeVisitor):
    def __init__(self, tree: ast.Module) -> None:
        self.aliases: dict[str, str] = {}  # name -> dotted module/object path it stands for
        self.parents: dict[int, ast.AST] = {}
        self.classes: set[str] = set()
        functions = []
        for parent in ast.walk(tree):  # one pass: imports (used before their line is reached), defs, parents
            for child in ast.iter_child_nodes(parent):
                self.parents[id(child)] = parent
            if isinstance(parent, ast.Import) or (isinstance(parent, ast.ImportFrom) and parent.module):
                self.aliases.update(import_alias(parent, a) for a in parent.names)
            elif isinstance(parent, ast.ClassDef):
                self.classes.add(parent.name)
            elif isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append(parent)
        mark_chains(tree)
        self.bindings = binding_counts(tree)
        self.alias_values: set[int] = set()  # the value nodes of those module-level aliases
        self.assigned_aliases = self._assigned_aliases(tree)
        self.aliases.update(self.assigned_aliases)
        self.import_aliases = dict(self.aliases)
        self.jit_names = {f.name for f in functions if self._jit_decorated(f)}
        self.rebound = self._rebound_names(tree)
        self.constants = self._constants(tree)
        self.fetched = self._fetched_names(tree)
        self.built = self._built_modules(tree)
        self.kernel_aliases: set[str] = set()
        self.kernel_aliases = self._kernel_aliases(tree)
        self.grid_bindings: dict[str, list[ast.AST]] = {}  # name -> values it is assigned, defs of that name
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name not in self.jit_names:
                self.grid_bindings.setdefault(node.name, []).append(node)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if len(targets) == 1 and isinstance(targets[0], ast.Name):
                    if isinstance(node.value, (ast.Tuple, ast.List, ast.Call, ast.Lambda)):
                        self.grid_bindings.setdefault(targets[0].id, []).append(node.value)
        self.violations: list[str] = []
        self.kernels: list[str] = []
        self.type_values: set[str] = set()  # names bound to a type(...) result
        self.ok_nodes: set[int] = set()  # Name/Attribute nodes already judged in their call context
        self.jit_locals: set[str] | None = None  # set while inside a jit body
        self.kernel_rules = KernelRules(self._resolve, self._flag, self.jit_names, set(self.constants))

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
            path = self._resolve(target)
            if path is not None and (path == "triton.jit" or object_path(path) == JIT_DECORATOR):
                return True
        return False

    def _check_path(self, node: ast.AST, path: str) -> None:
        """Rules for a dotted path reached from an imported module (import, attribute, from-import): by
        its names, then by the real objects it reaches."""
        if path in ALLOWED_PRIVATE:
            return
        problem = path_problem(path) or REAL.reach(path)
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
        elif attr in DENIED_ATTRS or DENIED_ATTR_PATTERN.match(attr):
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
        """Assignment into an attribute or item of a module, a library object or a type(): monkey-patching.

        Module objects cannot travel into other names (see _value), nor can library classes other than
        nn.Module subclasses, so a store through any other local name lands in an object the candidate
        created."""
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
        if isinstance(target, ast.Attribute) and target.attr in TENSOR_PROTOCOL:
            self._flag(node, f"assignment to .{target.attr} (Triton's interpreter would take the object for a tensor)")
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            root = chain_root(target)
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

    def _value(self, node: ast.AST, path: str) -> None:
        """Where the object a path reaches may travel: a module or an unresolvable path nowhere (only as the
        head of an attribute chain); nn.Module subclasses, functions and plain data anywhere; other library
        classes and objects only where no rule loses them (see _check_value)."""
        if id(node) in self.alias_values:
            return
        if object_path(path) == JIT_DECORATOR and not self._decorates(node):
            self._flag(node, f"{path} used other than as the decorator of a def (a kernel the gate never read)")
        kind = REAL.kind(path)
        if kind == "module":
            if not self._callee(node):
                self._flag(node, f"module {path} used as a value (modules are only named in attribute chains)")
        elif kind == "class":
            if path in GLOBAL_CLASSES or not REAL.is_module_class(path):
                self._check_value(node, f"module or class {path}")
        elif kind in ("object", "missing"):
            self._check_value(node, f"library object {path}")

    def _decorates(self, node: ast.AST) -> bool:
        """`@triton.jit` or `@triton.jit(...)` on a def."""
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Call) and parent.func is node:
            node, parent = parent, self.parents.get(id(parent))
        return isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and node in parent.decorator_list

    def _callee(self, node: ast.AST) -> bool:
        parent = self.parents.get(id(node))
        return isinstance(parent, ast.Call) and parent.func is node

    def _check_value(self, node: ast.AST, what: str) -> None:
        """A library class or object, or a type() result may be called, subclassed, compared, named in an
        annotation or aliased by a module-level `X = ...` (X bound once), never carried as a value (in a
        container, argument, return, default, class attribute), where no static rule could follow it to a
        monkey-patch."""
        child, parent = node, self.parents.get(id(node))
        if isinstance(parent, ast.Call) and parent.func is child:
            return
        if isinstance(parent, (ast.Compare, ast.ExceptHandler)):
            return
        if isinstance(parent, ast.ClassDef) and child in parent.bases:
            return
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and child in parent.decorator_list:
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

    # ------------------------------------------------------------------ imports
    def visit_Module(self, node: ast.Module) -> None:
        for name, where in self.rebound.items():
            self._flag(where, f"{name} is bound more than once (an import or @triton.jit function rebound)")
        self.generic_visit(node)

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for sub in ast.walk(ast.Module(body=node.body, type_ignores=[])):
            if isinstance(sub, (ast.Yield, ast.YieldFrom)):
                self._flag(sub, "yield inside a with block (a context left open past the call)")
        self.generic_visit(node)

    visit_AsyncWith = visit_With  # type: ignore[assignment]

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name not in ALLOWED_MODULES:
                self._flag(node, f"import of {alias.name} (not on the allow-list)")

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

    # ------------------------------------------------------------------ names and attributes
    def visit_Name(self, node: ast.Name) -> None:
        if (
            node.id in self.jit_names | self.kernel_aliases
            and isinstance(node.ctx, ast.Load)
            and self.jit_locals is None
        ):
            self._kernel_value(node)
        if id(node) in self.ok_nodes:
            return
        if node.id in DENIED_BUILTINS:
            self._flag(node, f"use of {node.id}")
        elif node.id in REFUSED_NAMES and node.id not in self.bindings:
            self._flag(node, f"use of {node.id}")
        elif node.id in ATTR_BUILTINS:
            self._flag(node, f"{node.id} used other than as a call with a literal attribute name")
        elif node.id == "type" and isinstance(node.ctx, ast.Load):
            self._flag(node, "type used other than as type(x)")
        elif _dunder(node.id) and not (node.id == "__name__" and isinstance(node.ctx, ast.Load)):
            self._flag(node, f"dunder name {node.id}")
        elif node.id in self.aliases and isinstance(node.ctx, ast.Load):
            if self.bindings.get(node.id, 0) > 1 and node.id in self.assigned_aliases:
                self._flag(node, f"{node.id} aliases {self.aliases[node.id]} and is bound elsewhere too")
            self._check_path(node, self.aliases[node.id])
            if not self._chain_prefix(node):
                self._value(node, self.aliases[node.id])
        elif node.id in self.type_values and isinstance(node.ctx, ast.Load) and not self._chain_prefix(node):
            self._check_value(node, f"type() result {node.id}")
        elif (
            isinstance(node.ctx, ast.Load)
            and node.id not in self.bindings
            and node.id not in self.aliases
            and node.id not in SAFE_BUILTINS | {"type", "__name__"}
        ):
            self._flag(node, f"name {node.id} is bound nowhere in the candidate and is not a plain builtin")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in self.jit_names and isinstance(node.ctx, ast.Load) and self.jit_locals is None:
            self._kernel_value(node)
        full = self._resolve(node)
        if id(node) not in self.ok_nodes and not (full is not None and self._chain_prefix(node)):
            self._attribute(node, in_call=False)  # a module path is judged whole, at its longest chain
        if full is not None and isinstance(node.ctx, ast.Load) and not self._chain_prefix(node):
            self._value(node, full)
        self.visit(node.value)

    def _chain_prefix(self, node: ast.AST) -> bool:
        parent = self.parents.get(id(node))
        return isinstance(parent, ast.Attribute) and parent.value is node

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in ATTR_BUILTINS and func.id not in self.bindings:
            self.ok_nodes.add(id(func))
            self._attr_builtin(node, func.id)
        elif isinstance(func, ast.Name) and func.id == "type" and func.id not in self.bindings:
            self.ok_nodes.add(id(func))
            if len(node.args) != 1 or node.keywords:
                self._flag(node, "type() with other than one argument (class creation)")
            elif not isinstance(self.parents.get(id(node)), ast.Compare):
                self._check_value(node, "type() result")
        elif isinstance(func, ast.Attribute):
            self.ok_nodes.add(id(func))
            self._attribute(func, in_call=True)
        path = self._resolve(func)
        if path is not None and object_path(path) in LAUNCH_HOOKS:
            self._launch_hooks(node, object_path(path) or "")
        if path is not None and object_path(path) in PLAIN_CALLS:
            if len(node.args) > PLAIN_CALLS[object_path(path) or ""] or node.keywords:
                self._flag(node, f"{path} with attribute names to copy (only its first argument)")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if self._kernel_ref(node.value) and self.jit_locals is None:
            self._grid(node.slice)
        self.generic_visit(node)

    def _own_receiver(self, node: ast.AST) -> bool:
        """self, cls, ctx, the candidate's classes, the modules it built, and attribute chains hanging off
        them (`self.lstm`)."""
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in OWN_RECEIVERS | {"cls"} | self.classes | self.built

    def _attr_builtin(self, node: ast.Call, builtin: str) -> None:
        """getattr & co.: a literal name is judged as the attribute it names; a computed one only on the
        candidate's own objects, with a head that cannot spell a private or denied name."""
        if len(node.args) < 2:
            self._flag(node, f"{builtin} without an attribute name")
            return
        obj, name = node.args[0], node.args[1]
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            if name.value in self.jit_names | self.kernel_aliases:
                self._flag(node, f"{builtin} of the kernel {name.value} by name (a kernel is only launched)")
            synthetic = ast.copy_location(ast.Attribute(value=obj, attr=name.value, ctx=ast.Load()), node)
            self._attribute(synthetic, in_call=False)
            path = self._resolve(obj)
            if path is not None:
                self.ok_nodes.add(id(obj))
                self._check_path(node, path)
                if builtin == "getattr":
                    self._value(node, f"{path}.{name.value}")
            if builtin in {"setattr", "delattr"}:
                self._check_store(
                    ast.copy_location(ast.Attribute(value=obj, attr=name.value, ctx=ast.Store()), node), node
                )
            return
        if self._resolve(obj) is not None or not self._own_receiver(obj):
            self._flag(node, f"{builtin} with a computed attribute name on other than the candidate's own objects")
            return
        problem = _computed_name_problem(name, self.jit_names | self.kernel_aliases)  # no kernel reached by name
        if problem:
            self._flag(node, f"{builtin} with {problem}")

    def visit_Constant(self, node: ast.Constant) -> None:
        """A dunder name as a string ("__globals__", "__builtins__") is only ever a key or attribute name handed to
        something that looks it up (a dict of globals, attrgetter): no honest kernel spells one."""
        text = node.value
        if isinstance(text, str) and _dunder(text) and text.isidentifier() and text != "__main__":
            self._flag(node, f"the string {text!r} (a dunder name)")
        elif isinstance(text, str) and text in TENSOR_PROTOCOL:  # add_module("data_ptr", m), {"data_ptr": ...}
            self._flag(node, f"the string {text!r} (what Triton's interpreter takes an object for a tensor by)")

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        for attr in node.kwd_attrs:  # `case C(__dict__=d)` reads the attribute by name
            self._check_attr_name(node, attr, node.cls, in_call=False)
        self.generic_visit(node)

    # ------------------------------------------------------------------ stores
    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_store(t, node)
        self._track_type(node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_store(node.target, node)
        if node.value is not None:
            self._track_type([node.target], node.value)
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
        self._track_type([node.target], node.value)
        self.generic_visit(node)

    def _track_type(self, targets: list[ast.AST], value: ast.AST) -> None:
        """`t = type(x)` makes t a class (checked as such); any other binding of the name drops it."""
        is_type = isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "type"
        for t in targets:
            if isinstance(t, ast.Name):
                self.type_values.discard(t.id)
                if is_type:
                    self.type_values.add(t.id)

    # ------------------------------------------------------------------ definitions
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if _dunder(node.name):
            self._flag(node, f"class named {node.name}")
        for base in node.bases:
            path = self._resolve(base) or ""
            if path in TENSOR_CLASSES or (path and REAL.is_tensor_class(path)):
                self._flag(node, f"class {node.name} subclasses torch.Tensor")
            builtin = isinstance(base, ast.Name) and base.id in BUILTIN_VALUE_TYPES and base.id not in self.bindings
            if builtin or (path and REAL.is_builtin_value_class(path)):
                # Triton's interpreter rebuilds tuple arguments with type(arg)(...): the subclass's __init__ would
                # run inside the launch (red team F7c); the same for any value type it might convert
                self._flag(node, f"class {node.name} subclasses a builtin value type ({ast.unparse(base)})")
        for stmt in node.body:  # `data_ptr = ...` / `data_ptr: int` in a class body
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
            for t in targets:
                if isinstance(t, ast.Name) and t.id in TENSOR_PROTOCOL:
                    self._flag(stmt, f"class {node.name} binds {t.id} (what Triton takes a tensor by)")
        for kw in node.keywords:
            self._flag(node, f"class keyword {kw.arg}= (metaclass machinery)")
        self.generic_visit(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
            if a.arg in OWN_RECEIVERS | {"cls"}:
                self._flag(node, f"lambda parameter {a.arg} (the candidate's own objects come only into methods)")
        self.generic_visit(node)

    def _receiver_params(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """`self`, `cls` and `ctx` are the candidate's own objects only as the first parameter of a method of its
        own class: any other parameter so named could be handed a library object (red team N1)."""
        params = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        if node.args.vararg:
            params.append(node.args.vararg)
        if node.args.kwarg:
            params.append(node.args.kwarg)
        method = isinstance(self.parents.get(id(node)), ast.ClassDef)
        for i, a in enumerate(params):
            if a.arg in OWN_RECEIVERS | {"cls"} and not (
                method and i == 0 and a in node.args.posonlyargs + node.args.args
            ):
                self._flag(a, f"parameter {a.arg} of {node.name} is not the first parameter of a method")

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._receiver_params(node)
        if _dunder(node.name) and node.name not in DUNDER_DEFS:
            self._flag(node, f"defines {node.name}")
        if node.name in TENSOR_PROTOCOL:
            self._flag(node, f"defines {node.name} (Triton's interpreter would take the object for a tensor)")
        if node.name not in self.jit_names or self.jit_locals is not None or not self._jit_decorated(node):
            self.generic_visit(node)
            return
        self.kernels.append(node.name)
        if LIBRARY_KERNEL_NAME.match(node.name):
            self._flag(node, f"kernel name {node.name} imitates a library kernel name")
        self.kernel_rules.check(node)
        for deco in node.decorator_list:
            self._jit_options(deco)
            self.visit(deco)
        self.jit_locals = self.kernel_rules.locals
        try:
            for stmt in node.body:
                self.visit(stmt)
        finally:
            self.jit_locals = None
        self.visit(node.args)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def _jit_options(self, deco: ast.AST) -> None:
        """`@triton.jit(...)` takes literal compile options only: `launch_metadata=` and `repr=` are functions
        the launcher runs inside the verifier's launch hook (what names and streams a launch reports)."""
        if not isinstance(deco, ast.Call) or not self._decorates(deco.func):
            return
        path = self._resolve(deco.func)
        if path is None or not (path == "triton.jit" or object_path(path) == JIT_DECORATOR):
            return
        if deco.args:
            self._flag(deco, "triton.jit(...) takes keyword options only")
        for kw in deco.keywords:
            if kw.arg not in JIT_OPTIONS or not _literal(kw.value):
                self._flag(deco, f"triton.jit option {kw.arg or '**'} (literal {', '.join(sorted(JIT_OPTIONS))} only)")


@dataclass
class KernelParts:
    """What the replay rebuilds of a gated candidate: its jit functions (wherever defined; each name is bound
    once), the import aliases their bodies may use (name -> dotted path) and the literal constants they may
    read (name -> node)."""

    functions: list[ast.FunctionDef]
    aliases: dict[str, str]
    constants: dict[str, ast.expr]


def kernel_parts(source: str) -> KernelParts:
    """Gate `source` and hand back its kernel parts; ValueError if the gate refuses it."""
    result = check_source(source)
    if not result.passed:
        raise ValueError(result.message)
    tree = ast.parse(source)
    scanner = _Scanner(tree)
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and scanner._jit_decorated(n)]
    return KernelParts(functions, dict(scanner.aliases), dict(scanner.constants))


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
