"""What a candidate module binds, read once before the gate walks it: import aliases and the names assigned an
alias, names bound more than once, the module constants a kernel body may read, the names bound to objects the
candidate built (its own, whose attributes it may name at run time) and to objects it fetched (storing into
those is monkey-patching). Mixed into the gate's scanner (drkernel.verify.static.gate), which calls these while
it is constructed."""

from __future__ import annotations

import ast
from collections.abc import Callable

from drkernel.verify.static.gate_kernel import CONSTEXPR, literal, object_path
from drkernel.verify.static.gate_objects import REAL
from drkernel.verify.static.gate_policy import FRESH_BUILTINS, OWN_RECEIVERS


def chain_root(node: ast.AST) -> ast.AST:
    """`a.b[i].c` -> `a`: what a chain of attributes, items and stars starts from."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node


def binding_counts(tree: ast.Module) -> dict[str, int]:
    """How many places bind each name (any scope): an alias made by assignment must be bound only once."""
    counts: dict[str, int] = {}

    def add(name: str | None) -> None:
        if name:
            counts[name] = counts.get(name, 0) + 1

    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            add(node.id)
        elif isinstance(node, ast.arg):
            add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                add(a.asname or a.name.partition(".")[0])
        elif isinstance(node, ast.ExceptHandler):
            add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                add(name)
                add(name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)):
            add(node.name)
        elif isinstance(node, ast.MatchMapping):
            add(node.rest)
    return counts


def import_alias(node: ast.Import | ast.ImportFrom, alias: ast.alias) -> tuple[str, str]:
    """(bound name, dotted path) of one import binding."""
    if isinstance(node, ast.ImportFrom):
        return alias.asname or alias.name, f"{node.module}.{alias.name}"
    head = alias.name.partition(".")[0]
    return (alias.asname, alias.name) if alias.asname else (head, head)


def constant_value(node: ast.AST, resolve: Callable[[ast.AST], str | None]) -> bool:
    """A literal, or `tl.constexpr(literal)`: a module constant a kernel body may read."""
    if literal(node):
        return True
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords and literal(node.args[0]):
        path = resolve(node.func)
        return path is not None and object_path(path) == CONSTEXPR
    return False


def bound_names(target: ast.AST) -> list[str]:
    """Names a binding target rebinds (not those inside `a.b = ` or `a[i] = `, which store into a)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in bound_names(elt)]
    if isinstance(target, ast.Starred):
        return bound_names(target.value)
    return []


class ModuleBindings:
    """The scanner's pre-pass over the whole module (methods of drkernel.verify.static.gate's scanner)."""

    # Provided by the scanner (declared for readers; set in its __init__ before these run).
    aliases: dict[str, str]
    alias_values: set[int]
    bindings: dict[str, int]
    classes: set[str]
    jit_names: set[str]
    _resolve: Callable[[ast.AST], str | None]
    _kernel_ref: Callable[[ast.AST], bool]

    def _assigned_aliases(self, tree: ast.Module) -> dict[str, str]:
        """`F = torch.nn.functional` at module level, F bound nowhere else: an import under another name."""
        found: dict[str, str] = {}
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and self.bindings.get(node.targets[0].id) == 1
            ):
                path = self._resolve(node.value)
                if path is not None:
                    found[node.targets[0].id] = self.aliases[node.targets[0].id] = path
                    self.alias_values.add(id(node.value))
        return found

    def _rebound_names(self, tree: ast.Module) -> dict[str, ast.AST]:
        """Import aliases and jit functions bound by anything else too (an assignment, def, argument, loop...):
        a kernel body, which Triton runs with the module's globals, would meet the other object at run time."""
        imports: dict[str, set[str]] = {}
        counts: dict[str, int] = {}
        where: dict[str, ast.AST] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and node.module):
                for a in node.names:
                    name, path = import_alias(node, a)
                    imports.setdefault(name, set()).add(path)
                    counts[name] = counts.get(name, 0) + 1
                    where.setdefault(name, node)
        found = {name: where[name] for name, paths in imports.items() if len(paths) > 1}
        for name in imports:
            if self.bindings.get(name, 0) > counts[name]:
                found[name] = where[name]
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name in self.jit_names and self.bindings.get(fn.name, 0) > 1:
                found[fn.name] = fn
        return found

    def _kernel_aliases(self, tree: ast.Module) -> set[str]:
        """Names bound only to the file's jit functions (`kernel = k2d if big else k3d` spelt as two
        assignments): launched like the kernels themselves."""
        made: dict[str, int] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if self._kernel_ref(node.value) and node.targets[0].id not in self.jit_names:
                    made[node.targets[0].id] = made.get(node.targets[0].id, 0) + 1
        return {name for name, n in made.items() if self.bindings.get(name) == n}

    def _built_modules(self, tree: ast.Module) -> set[str]:
        """Names bound only to a construction of an nn.Module subclass or of the candidate's own class
        (`lstm = nn.LSTM(...)`): objects it built, whose attributes it may name at run time."""
        assigns = [
            (node.targets[0].id, node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ]
        built: set[str] = set()
        while True:  # `lstm = self.lstm` is the candidate's own too: to a fixed point
            own = OWN_RECEIVERS | {"cls"} | self.classes | built
            made: dict[str, int] = {}
            for name, value in assigns:
                root = value
                while isinstance(root, ast.Attribute):
                    root = root.value
                func = value.func if isinstance(value, ast.Call) else None
                path = self._resolve(func) if func is not None else None
                if (
                    (isinstance(func, ast.Name) and func.id in self.classes and func.id not in self.aliases)
                    or (path is not None and REAL.is_module_class(path))
                    or (isinstance(value, ast.Attribute) and isinstance(root, ast.Name) and root.id in own)
                ):
                    made[name] = made.get(name, 0) + 1
            found = {name for name, n in made.items() if self.bindings.get(name) == n} - self.aliases.keys()
            if found <= built:
                return built
            built |= found

    def _constants(self, tree: ast.Module) -> dict[str, ast.expr]:
        """Module-level names bound once to a literal or `tl.constexpr(literal)`: the globals a kernel body
        may read (the replay rebuilds them and nothing else)."""
        found = {}
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if len(targets) == 1 and isinstance(targets[0], ast.Name) and self.bindings.get(targets[0].id) == 1:
                    if constant_value(node.value, self._resolve):
                        found[targets[0].id] = node.value
        return found

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
                for name in bound_names(target):
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
            path = self._resolve(func)
            if path is not None:  # a library class builds a fresh instance
                return not REAL.is_class(path)
            return True
        if isinstance(value, ast.Subscript):
            return True
        if isinstance(value, ast.Attribute):
            root = chain_root(value)
            return not (isinstance(root, ast.Name) and root.id in OWN_RECEIVERS | self.classes)
        return False
