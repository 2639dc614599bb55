"""The reference runner: a clean fork that runs only the reference model, driven by the judge exactly as
the candidate is (same orders, same replies, same timing on the judge's clock).

No candidate code ever runs in this process, so nothing the candidate does in its own process (hooks,
TorchFunctionMode, `sys.setprofile`, patched forwards) can slow the reference or read its outputs.
Every call goes through the same runner.Observer as the candidate's (launch recording, aliasing and
stream checks), so the harness's own per-call work weighs the same on both sides of a speedup; of
what it observes the judge uses only whether the reference returns (views of) its inputs.
"""

from __future__ import annotations

from typing import Any

from drkernel.verify.harness import problem
from drkernel.verify.harness.runner import Observer, Runner, short
from drkernel.verify.judging.backends import env_for, make_backend
from drkernel.verify.process import protocol
from drkernel.verify.process.child_spec import ChildSpec
from drkernel.verify.process.sandbox import capture_output, isolate


def warm_up(backend: Any) -> None:
    """What a spare runner does while it waits, identical in both runners (no reference or candidate code)."""
    backend.warm_libraries()


def prepare(device: str, workdir: str, memory_limit_mb: int, group_uid: int | None = None) -> None:
    """The runner's sandbox (no memory limit: the reference is trusted), also what a spare applies ahead."""
    isolate(workdir, on_accelerator=device != "cpu", memory_limit_mb=None, env=env_for(device), uid=group_uid)
    capture_output(workdir)


def main(spec: ChildSpec, conn: Any) -> None:
    """Entry point of the reference runner (a fork of the warm fork-server)."""
    try:
        prepare(spec.device, spec.workdir, spec.memory_limit_mb, spec.group_uid)
        backend = make_backend(spec.device)
        observer = Observer(spec.reference_path, backend, require_triton=False, kernel_names=[], watch_process=False)
        observer.install()
        module = problem.import_file(spec.reference_path, "reference")
        observer.recorder.note_module(module)
        args, kwargs = problem.init_inputs(module, backend)
        model = problem.build_model(getattr(module, spec.entry_point), args, kwargs, backend)
    except Exception as e:
        protocol.send(conn, {"type": "reference_failed", "message": f"reference failed to load: {short(e)}"})
        return
    protocol.send(conn, {"type": "loaded", "load_s": 0.0, "kernels": [], "launch_hook": "none", "aliased": False})
    try:
        Runner(conn, backend, model, observer.observe, observer.evidence).serve()
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass
