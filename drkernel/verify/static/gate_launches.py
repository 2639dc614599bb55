"""How the gate reads a kernel launch outside kernel bodies: a jit function is only launched, `kernel[grid](...)`,
and every function Triton calls at launch (a grid function, an autotune/heuristics hook) is scalar arithmetic on
its arguments, since it runs inside the kernel's measured time. Mixed into the gate's scanner
(drkernel.verify.static.gate)."""

from __future__ import annotations

import ast
from collections.abc import Callable

from drkernel.verify.static.gate_policy import JIT_HOST_CALLS, LAUNCH_HOOKS, SCALAR_HOOK_CALLS, SCALAR_HOOK_METHODS

NOT_IN_HOOKS = (ast.Lambda, ast.NamedExpr, ast.comprehension, ast.Await, ast.Yield, ast.YieldFrom, ast.Starred)
SCALAR_STATEMENTS = (ast.Assign, ast.AnnAssign, ast.Return, ast.If, ast.Expr, ast.Pass)  # no `+=`: in place on a tensor


class LaunchRules:
    """Kernel references, grids and launch hooks (methods of drkernel.verify.static.gate's scanner)."""

    # Provided by the scanner (declared for readers; set in its __init__).
    bindings: dict[str, int]
    grid_bindings: dict[str, list[ast.AST]]
    jit_names: set[str]
    kernel_aliases: set[str]
    parents: dict[int, ast.AST]
    _flag: Callable[[ast.AST, str], None]
    _resolve: Callable[[ast.AST], str | None]

    def _kernel_ref(self, node: ast.AST) -> bool:
        """`kernel` or `self.kernel` / `Cls.kernel` for one of the file's jit functions."""
        return (isinstance(node, ast.Name) and node.id in self.jit_names | self.kernel_aliases) or (
            isinstance(node, ast.Attribute) and node.attr in self.jit_names
        )

    def _kernel_value(self, node: ast.Name | ast.Attribute) -> None:
        """Outside kernel bodies a jit function is only launched, `kernel[grid](...)`: carried anywhere else
        (another name, an argument, `.run(grid=...)`) its grid could be a function no rule read."""
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Subscript) and parent.value is node:
            return
        if isinstance(parent, ast.Assign) and parent.value is node:
            if all(isinstance(t, ast.Name) and t.id in self.kernel_aliases for t in parent.targets):
                return
        self._flag(node, f"{ast.unparse(node)} used other than as kernel[grid](...)")

    def _grid(self, grid: ast.AST) -> None:
        """`kernel[grid]`: a grid function runs inside the launch (inside the kernel's measured time), so it
        is a scalar lambda or def; a name holding the grid is bound only to those, tuples, lists or calls; a call
        only of the file's scalar defs that return a tuple or list literal (a call could return a function)."""
        if isinstance(grid, (ast.Lambda, ast.FunctionDef)):
            if not self._scalar_lambda(grid):
                self._flag(grid, "a grid function is not scalar arithmetic on its arguments")
        elif isinstance(grid, ast.Name):
            values = self.grid_bindings.get(grid.id)
            if values is None or len(values) != self.bindings.get(grid.id, 0):
                self._flag(grid, f"grid {grid.id} is bound to something other than a tuple, list, call or function")
            else:
                for value in values:
                    self._grid(value)
        elif isinstance(grid, ast.Call):
            if not self._tuple_factory(grid):
                self._flag(grid, f"grid {ast.unparse(grid)[:40]} is a call that could return a function")
        elif not isinstance(grid, (ast.Tuple, ast.List)):
            self._flag(grid, f"grid {ast.unparse(grid)[:40]} is not a tuple, list, call or function")

    def _tuple_factory(self, call: ast.Call) -> bool:
        """A call of a name bound only to the file's scalar defs, each returning tuple or list literals."""
        if not isinstance(call.func, ast.Name) or self._resolve(call.func) is not None:
            return False
        defs = self.grid_bindings.get(call.func.id, [])
        if not defs or len(defs) != self.bindings.get(call.func.id, 0):
            return False
        for fn in defs:
            if not (isinstance(fn, ast.FunctionDef) and self._scalar_lambda(fn)):
                return False
            returns = [r for stmt in fn.body for r in ast.walk(stmt) if isinstance(r, ast.Return)]
            if not returns or not all(isinstance(r.value, (ast.Tuple, ast.List)) for r in returns):
                return False
        return True

    def _launch_hooks(self, node: ast.Call, which: str) -> None:
        """autotune/Config/heuristics: the functions Triton calls at launch are scalar lambdas (see policy)."""
        positional, keywords = LAUNCH_HOOKS[which]
        if len(node.args) > positional or any(isinstance(a, ast.Starred) for a in node.args):
            self._flag(node, f"{which} with more than {positional} positional arguments")
        hooks = [k.value for k in node.keywords if k.arg in keywords or k.arg is None]
        if which.endswith("heuristics"):
            values = node.args[0] if node.args else None
            if not isinstance(values, ast.Dict) or None in values.keys:
                self._flag(node, "triton.heuristics without a literal dict of lambdas")
            else:
                hooks += values.values
        for hook in hooks:
            if isinstance(hook, ast.Dict) and None not in hook.keys:  # prune_configs_by={'perf_model': ...}
                hooks += hook.values
            elif not self._scalar_lambda(hook):
                self._flag(
                    hook,
                    f"a function Triton calls at launch ({ast.unparse(hook)[:60]}) is not a lambda "
                    "of scalar arithmetic on its arguments",
                )

    def _scalar_lambda(self, node: ast.AST) -> bool:
        """A lambda (or a def of plain assignments, ifs and returns) that reads what it likes but calls only
        min/max/int/..., math, triton.cdiv/next_power_of_2 and a tensor's size methods: it can compute launch
        parameters, not run (or write) a tensor operation."""
        if not isinstance(node, (ast.Lambda, ast.FunctionDef)) or node.args.defaults or node.args.kw_defaults:
            return False
        if isinstance(node, ast.FunctionDef):
            if node.decorator_list or node.returns:
                return False
            statements = [s for stmt in node.body for s in ast.walk(stmt) if isinstance(s, ast.stmt)]
            if not all(isinstance(s, SCALAR_STATEMENTS) for s in statements):
                return False
            for s in statements:  # assignments bind names only: no store into a tensor or object
                targets = s.targets if isinstance(s, ast.Assign) else [getattr(s, "target", None)]
                for t in targets:
                    if any(
                        isinstance(n, (ast.Attribute, ast.Subscript, ast.Starred)) for n in ast.walk(t or ast.Pass())
                    ):
                        return False
            body: ast.AST = ast.Module(body=node.body, type_ignores=[])
        else:
            body = node.body
        for sub in ast.walk(body):
            if isinstance(sub, ast.Call):
                func, path = sub.func, self._resolve(sub.func)
                if path is not None:
                    if not (path in JIT_HOST_CALLS or path.startswith("math.")):
                        return False
                elif isinstance(func, ast.Name):
                    if func.id not in SCALAR_HOOK_CALLS or func.id in self.bindings:
                        return False
                elif not (isinstance(func, ast.Attribute) and func.attr in SCALAR_HOOK_METHODS):
                    return False
            elif isinstance(sub, (ast.MatMult, *NOT_IN_HOOKS)):
                return False
        return True
