"""The reference runner: a clean fork that runs only the reference model, driven by the judge exactly as
the candidate is (same orders, same replies, same timing on the judge's clock).

No candidate code ever runs in this process, so nothing the candidate does in its own process (hooks,
TorchFunctionMode, `sys.setprofile`, patched forwards) can slow the reference or read its outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drkernel.verify import problem, protocol
from drkernel.verify.devices import env_for, make_backend
from drkernel.verify.runner import Runner, aliases, flatten, short
from drkernel.verify.sandbox import capture_output, isolate


class _Aliasing:
    """The reference's only evidence: whether it returns (views of) its inputs, so that the candidate
    doing the same is not called a hack."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def observe(self, label: str, call: Callable[[], Any], inputs: list[Any]) -> Any:
        out = call()
        if len(self.calls) < 5 and aliases(flatten(out), inputs):
            self.calls.append(label)
        return out

    def evidence(self) -> dict[str, Any]:
        return {"aliases": self.calls}


def main(spec: dict[str, Any], conn: Any) -> None:
    """Entry point of the reference runner (a fork of the warm fork-server)."""
    try:
        isolate(spec["workdir"], on_accelerator=spec["device"] != "cpu", memory_limit_mb=None,
                env=env_for(spec["device"]))
        capture_output(spec["workdir"])
        backend = make_backend(spec["device"])
        module = problem.import_file(spec["reference_path"], "reference")
        args, kwargs = problem.init_inputs(module, backend)
        model = problem.build_model(getattr(module, spec["entry_point"]), args, kwargs, backend)
    except Exception as e:
        protocol.send(conn, {"type": "reference_failed", "message": f"reference failed to load: {short(e)}"})
        return
    protocol.send(conn, {"type": "loaded", "load_s": 0.0, "kernels": [], "launch_hook": "none", "aliased": False})
    try:
        observer = _Aliasing()
        Runner(conn, backend, model, observer.observe, observer.evidence).serve()
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass
