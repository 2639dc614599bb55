"""Static checks of a reference's source and of reference failures, shared by `drkernel verify` and the HTTP ingress
(the sandboxed load check of reference files is drkernel.verify.reference_check).

A reference is the caller's input: one that does not parse or lacks the KernelBench names is a usage
error (CLI exit 2, HTTP 422), found statically before any process starts. A reference that fails
while running is also the caller's fault; its message is cut to one line without server paths.
No Ray, no torch: the CLI imports this before anything heavy.
"""

from __future__ import annotations

import ast
import re

REQUIRED_FUNCTIONS = ("get_inputs", "get_init_inputs")
_PATH = re.compile(r"(/[^\s'\"():,]+)+/([^\s/'\"():,]+)")


def reference_problem(source: str, entry_point: str) -> str | None:
    """Why `source` cannot be a KernelBench reference with class `entry_point`, or None if it can."""
    try:
        tree = ast.parse(source, filename="reference.py")
    except SyntaxError as e:
        return f"reference does not parse: {e.msg} (line {e.lineno})"
    except ValueError as e:  # null bytes
        return f"reference does not parse: {e}"
    defined: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(t.id for t in targets if isinstance(t, ast.Name))
    missing = [name for name in (entry_point, *REQUIRED_FUNCTIONS) if name not in defined]
    if missing:
        return (
            f"reference defines no {', '.join(missing)} (a KernelBench reference needs {entry_point}, "
            f"{', '.join(REQUIRED_FUNCTIONS)})"
        )
    return None


def one_line(message: str) -> str:
    """The first line of a failure message, with directories stripped from any file path in it."""
    first = message.strip().splitlines()[0] if message.strip() else "reference failed"
    return _PATH.sub(r"\2", first)
