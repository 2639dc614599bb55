"""The untrusted side of an evaluation: a sandboxed child that imports the candidate and runs it when told.

It holds no reference output, no seed and no timer: the judge hands it input tensors, times its
replies on the judge's own clock and compares what it returns. What it observes about itself (which
of the candidate's own Triton kernels launched, on which stream, harness tampering, processes left
behind, profiler coverage) is reported as evidence that can only lower a reward.

Before the candidate is imported it sends "isolation" and, if the reference fails to load here,
"reference_failed"; then "importing". The judge believes infra-like messages only before "importing":
after it, candidate code shares this process and could write anything into the channel.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from drkernel.verify.cost_model import trace
from drkernel.verify.harness import problem
from drkernel.verify.harness.runner import Fault, Observer, Runner, classify, flatten, short
from drkernel.verify.judging.backends import env_for, make_backend
from drkernel.verify.process import protocol, seccomp
from drkernel.verify.process.child_spec import ChildSpec
from drkernel.verify.process.sandbox import capture_output, isolate

# The candidate's share of an NVIDIA device (torch's caching allocator refuses more): beside the judge's
# admission estimate, so a candidate that tries to fill the device runs out itself (reward 0) and neither
# the judge, the reference nor a neighbouring evaluation is starved into a masked or zero verdict.
CANDIDATE_MEMORY_SHARE = 0.3


def _coverage_fn(
    observer: Observer, backend: Any, model: Any
) -> Callable[[list[Any]], tuple[dict[str, Any], list[Any]]]:
    def measure(sets: list[Any]) -> tuple[dict[str, Any], list[Any]]:
        from drkernel.verify.harness import coverage

        if backend.name == "cpu":
            return coverage.cpu_coverage(observer.recorder, model, sets)
        return coverage.device_coverage(observer.recorder, backend, model, sets)

    return measure


def warm_up(backend: Any) -> None:
    """What a spare runner does while it waits, identical in both runners (no reference or candidate code)."""
    backend.warm_libraries()


def prepare(device: str, workdir: str, memory_limit_mb: int, group_uid: int | None = None) -> dict[str, str]:
    """The sandbox, applied before any candidate code exists here (also what a spare does ahead of time)."""
    layers = isolate(
        workdir, on_accelerator=device != "cpu", memory_limit_mb=memory_limit_mb, env=env_for(device), uid=group_uid
    )
    layers["process_control"] = seccomp.confine_to_self()  # no signal or priority reaches its judge or reference
    capture_output(workdir)
    return layers


def main(spec: ChildSpec, conn: Any) -> None:
    """Entry point of the candidate child (a fork of the warm fork-server)."""
    from drkernel.verify.process import preload

    try:
        layers = prepare(spec.device, spec.workdir, spec.memory_limit_mb, spec.group_uid)
        layers["preloaded"] = "yes" if preload.preloaded() else "NO (fork-server preload failed)"
        backend = make_backend(spec.device)
        if spec.device == "cuda":  # a candidate that hogs the device fails itself, not the judge or a neighbour
            backend.torch.cuda.set_per_process_memory_fraction(CANDIDATE_MEMORY_SHARE)
            layers["device_memory_cap"] = f"{CANDIDATE_MEMORY_SHARE:.0%} of the device"
        protocol.send(conn, {"type": "isolation", "layers": layers})
    except Exception as e:
        protocol.send(conn, {"type": "reference_failed", "message": f"candidate sandbox setup failed: {short(e)}"})
        return
    try:
        ref_module = problem.import_file(spec.reference_path, "reference")
        init_args, init_kwargs = problem.init_inputs(ref_module, backend)
    except Exception as e:
        protocol.send(conn, {"type": "reference_failed", "message": f"reference failed to load: {short(e)}"})
        return
    observer = Observer(spec.candidate_path, backend, spec.require_triton, list(spec.gate_kernels))
    try:
        observer.install()
        protocol.send(conn, {"type": "importing"})
        model, aliased, load_s = _load(spec, observer, backend, ref_module, init_args, init_kwargs)
        observer.check_tamper()
        modelled = spec.device == "cpu" and spec.options.timing == "cpu_model"
        committed, state = trace.commit_state(model, vars(sys.modules["candidate"])) if modelled else (None, {})
        protocol.send(
            conn,
            {
                "type": "loaded",
                "load_s": load_s,
                "kernels": sorted(observer.kernel_names),
                "launch_hook": observer.recorder.hook_api,
                "aliased": aliased,
                "state": committed,
            },
        )
        runner = Runner(
            conn, backend, model, observer.observe, observer.evidence, _coverage_fn(observer, backend, model)
        )
        if modelled:
            runner.trace = lambda inputs: trace.record(lambda: model(*inputs), inputs, state, flatten)
        runner.serve()
    except Fault as f:
        protocol.send(
            conn, {"type": "fault", "kind": f.kind, "message": f.message, "detail": f.detail, "phase": "load"}
        )
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the judge decided and went away
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    # Stay alive until the caller kills this process tree: exiting first would orphan whatever the
    # candidate started, and an orphan outside the tree can no longer be found.
    try:
        conn.recv_bytes(16)
    except (EOFError, OSError):
        pass


def _load(
    spec: ChildSpec,
    observer: Observer,
    backend: Any,
    ref_module: Any,
    init_args: list[Any],
    init_kwargs: dict[str, Any],
) -> tuple[Any, bool, float]:
    t0 = time.perf_counter()
    path = spec.candidate_path
    try:
        module = problem.import_file(path, "candidate")
    except SyntaxError as e:
        raise Fault("syntax", short(e)) from e
    except ImportError as e:
        raise Fault("import", short(e), protocol.traceback_tail()) from e
    except Exception as e:
        kind = "triton_compile" if classify(e, path, set()) == "triton_compile" else "import"
        raise Fault(kind, short(e), protocol.traceback_tail()) from e
    observer.kernel_names |= set(observer.recorder.note_module(module))
    entry = spec.entry_point
    cls = getattr(module, entry + "New", None)
    aliased = False
    if cls is None and not spec.require_triton and isinstance(getattr(module, entry, None), type):
        cls, aliased = getattr(module, entry), True
    if not isinstance(cls, type):
        raise Fault("missing_model_new", f"the candidate defines no class {entry}New")
    try:
        model = problem.build_model(cls, init_args, init_kwargs, backend)
    except Exception as e:
        raise Fault("init", short(e), protocol.traceback_tail()) from e
    return model, aliased, time.perf_counter() - t0
