"""Static gate: reject candidate sources that reach for obvious escape or tampering APIs.

Cheap and advisory (a determined candidate can hide a call from an AST walk); the runtime checks and
the process sandbox are what hold. It runs in the verifier's own process before anything is forked,
so syntax errors and forbidden imports cost no child process.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

# Modules a kernel has no business importing: processes, sockets, native calls, threads,
# introspection of the harness (frames, the garbage collector) and the harness itself.
FORBIDDEN_MODULES = frozenset(
    {
        "subprocess", "socket", "ctypes", "cffi", "multiprocessing", "threading", "_thread",
        "concurrent", "asyncio", "signal", "pty", "gc", "inspect", "importlib", "marshal",
        "shutil", "urllib", "http", "requests", "httpx", "ftplib", "telnetlib", "smtplib",
        "resource", "mmap", "drkernel", "pipelines", "actors", "serve_apps", "builtins",
        "torch.multiprocessing", "torch.distributed",
    }
)
FORBIDDEN_BUILTINS = frozenset({"__import__", "eval", "exec", "compile", "breakpoint", "globals", "vars"})
FORBIDDEN_OS_CALLS = frozenset(
    {
        "system", "popen", "fork", "forkpty", "execv", "execve", "execl", "execle", "execlp", "execlpe",
        "execvp", "execvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp",
        "spawnvpe", "posix_spawn", "posix_spawnp", "kill", "killpg", "setsid", "setpgid", "_exit",
        "putenv", "unsetenv", "chdir", "chroot",
    }
)
FORBIDDEN_SYS_ATTRS = frozenset({"_getframe", "settrace", "setprofile", "modules", "meta_path", "path_hooks"})
# Work placed on another stream escapes the harness's events; the torch stream APIs by name.
STREAM_ATTRS = frozenset({"Stream", "ExternalStream", "stream", "set_stream", "StreamContext"})
# Roots whose attributes must never be assigned (monkey-patching the harness's view of the world).
PROTECTED_ROOTS = frozenset({"torch", "triton", "time", "numpy", "os", "sys", "math"})


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
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


class _Scanner(ast.NodeVisitor):
    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}  # local name -> fully qualified module/object name
        self.violations: list[str] = []
        self.kernels: list[str] = []

    def _flag(self, node: ast.AST, what: str) -> None:
        self.violations.append(f"line {getattr(node, 'lineno', '?')}: {what}")

    def _resolve(self, node: ast.AST) -> str | None:
        name = _dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        base = self.aliases.get(head, head)
        return f"{base}.{rest}" if rest else base

    @staticmethod
    def _module_forbidden(module: str) -> bool:
        return any(module == m or module.startswith(m + ".") for m in FORBIDDEN_MODULES)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if self._module_forbidden(alias.name):
                self._flag(node, f"import of {alias.name}")
            local = alias.asname or alias.name.partition(".")[0]
            self.aliases[local] = alias.name if alias.asname else local
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self._flag(node, "relative import")
        for alias in node.names:
            full = f"{module}.{alias.name}" if module else alias.name
            if self._module_forbidden(module) or self._module_forbidden(full):
                self._flag(node, f"import of {full}")
            if module == "os" and alias.name in FORBIDDEN_OS_CALLS:
                self._flag(node, f"import of os.{alias.name}")
            if module == "sys" and alias.name in FORBIDDEN_SYS_ATTRS:
                self._flag(node, f"import of sys.{alias.name}")
            self.aliases[alias.asname or alias.name] = full
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in FORBIDDEN_BUILTINS and node.id not in self.aliases:
            self._flag(node, f"use of builtin {node.id}")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        full = self._resolve(node) or ""
        root = full.partition(".")[0]
        if root == "os" and node.attr in FORBIDDEN_OS_CALLS:
            self._flag(node, f"use of {full}")
        if root == "sys" and node.attr in FORBIDDEN_SYS_ATTRS:
            self._flag(node, f"use of {full}")
        if root == "torch" and node.attr in STREAM_ATTRS:
            self._flag(node, f"stream API {full}")
        if node.attr in {"__globals__", "__builtins__", "__subclasses__", "f_back", "f_locals", "f_globals"}:
            self._flag(node, f"introspection through .{node.attr}")
        self.generic_visit(node)

    def _check_target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._check_target(elt, node)
            return
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            root = _root(target)
            base = self._resolve(root) if isinstance(root, ast.Name) else None
            if base and base.partition(".")[0] in PROTECTED_ROOTS:
                self._flag(node, f"assignment into {base} (monkey-patching)")

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_target(t, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._check_target(t, node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = self._resolve(node.func) or ""
        if func in {"setattr", "delattr"} and node.args:
            root = _root(node.args[0])
            base = self._resolve(root) if isinstance(root, ast.Name) else None
            if base and base.partition(".")[0] in PROTECTED_ROOTS:
                self._flag(node, f"{func} on {base} (monkey-patching)")
        if func in {"open", "io.open", "os.open", "builtins.open"} and self._opens_for_writing(node):
            self._flag(node, "open() for writing")
        self.generic_visit(node)

    @staticmethod
    def _opens_for_writing(node: ast.Call) -> bool:
        mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg in {"mode", "flags"}), None)
        if mode is None:
            return False
        if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
            return any(c in mode.value for c in "wax+")
        return True  # a computed mode or os.O_* flags: assume the worst

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            if (self._resolve(base) or "") in {"torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase"}:
                self._flag(node, f"class {node.name} subclasses torch.Tensor")
        self.generic_visit(node)

    def _is_triton_jit(self, deco: ast.AST) -> bool:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = self._resolve(target) or ""
        return name.startswith("triton") and name.rsplit(".", 1)[-1] == "jit"

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if any(self._is_triton_jit(d) for d in node.decorator_list):
            self.kernels.append(node.name)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]


def check_source(source: str, require_triton: bool = True) -> GateResult:
    """Parse and scan a candidate; the first failing rule decides the error kind."""
    try:
        tree = ast.parse(source, filename="candidate.py")
    except SyntaxError as e:
        return GateResult(False, "syntax", f"SyntaxError: {e.msg} (line {e.lineno})")
    except ValueError as e:  # e.g. null bytes in the source
        return GateResult(False, "syntax", f"unparsable source: {e}")
    except (RecursionError, MemoryError):
        return GateResult(False, "syntax", "source nested too deeply to parse")
    scanner = _Scanner()
    try:
        scanner.visit(tree)
    except RecursionError:
        return GateResult(False, "forbidden", "source nested too deeply to check")
    if scanner.violations:
        shown = "; ".join(scanner.violations[:5])
        more = f" (+{len(scanner.violations) - 5} more)" if len(scanner.violations) > 5 else ""
        return GateResult(False, "forbidden", f"forbidden constructs: {shown}{more}", scanner.violations, scanner.kernels)
    if require_triton and not scanner.kernels:
        return GateResult(False, "no_triton", "no @triton.jit kernel in the candidate", [], [])
    return GateResult(True, triton_kernels=scanner.kernels)
