"""A KernelGYM-style evaluator, rebuilt as the comparison point for benchmarks/verifier_bench.py.

It follows drkernel_spec.md §6.1-6.6: every evaluation is a fresh `python` process for the kernel task
and, if the kernel passed, another fresh process for the reference task; inputs are made on the CPU by
`get_inputs()` and moved to the device; correctness runs the reference and then the candidate on the
same tensor objects (5 seeds drawn from seed 42, atol = rtol = 1e-2, shape check, then allclose);
a Triton launch-hook pass flags decoy kernels; timing is 3 warm-ups and then `trials` calls, each
between two CUDA events on the current stream followed by a synchronize, with one fixed input set,
no L2 flush, no no_grad, and the mean reported; a profiler pass over a few forwards gives coverage.
Run as a script it is one task (`--role kernel|reference`) and prints one JSON line.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SEED = 42


def _load(path: str, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _seed(torch: Any, seed: int) -> None:
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)


def _init_inputs(module: Any) -> tuple[list[Any], dict[str, Any]]:
    init = list(module.get_init_inputs())
    if len(init) == 2 and isinstance(init[0], (list, tuple)) and not init[0] and isinstance(init[1], dict):
        return [], dict(init[1])
    return init, {}


def _build(torch: Any, cls: type, args: list[Any], kwargs: dict[str, Any], device: str) -> Any:
    _seed(torch, SEED)
    return cls(*args, **kwargs).to(device)


def _inputs(torch: Any, module: Any, seed: int, device: str) -> list[Any]:
    """CPU-made inputs moved to the device, as KernelGYM does."""
    _seed(torch, seed)
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]


def _sync(torch: Any, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _time(torch: Any, model: Any, inputs: list[Any], device: str, trials: int) -> list[float]:
    """3 warm-ups, then events on the current stream around each call (wall clock on CPU)."""
    for _ in range(3):
        model(*inputs)
        _sync(torch, device)
    times = []
    for _ in range(trials):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(*inputs)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            model(*inputs)
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def _triton_launches(model: Any, inputs: list[Any]) -> int | None:
    """Launch-hook detection (compiled Triton only; the interpreter never calls the hook)."""
    import torch
    import triton

    chain = getattr(getattr(getattr(triton, "knobs", None), "runtime", None), "launch_enter_hook", None)
    if chain is None or not hasattr(chain, "add"):
        return None
    seen: list[int] = []
    hook = lambda *_: seen.append(1)  # noqa: E731
    for mode in (torch.inference_mode, torch.enable_grad):
        with mode():
            model(*inputs)
            chain.add(hook)
            try:
                model(*inputs)
            finally:
                chain.remove(hook)
        if not seen:
            return 0
    return len(seen)


def _coverage(torch: Any, model: Any, inputs: list[Any], names: set[str]) -> float | None:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA], record_shapes=True, profile_memory=True) as prof:
        for _ in range(5):
            model(*inputs)
        torch.cuda.synchronize()
    total = mine = 0.0
    for e in prof.events():
        if e.device_type.name != "CUDA":
            continue
        duration = e.time_range.elapsed_us()
        total += duration
        if any(n.lower() in e.name.lower() or e.name.lower() in n.lower() for n in names):  # KernelGYM's loose match
            mine += duration
    return mine / total if total else None


def run_task(
    role: str,
    reference: str,
    candidate: str | None,
    device: str,
    trials: int,
    correct_trials: int,
    profile_coverage: bool,
) -> dict[str, Any]:
    import torch

    t0 = time.perf_counter()
    ref_module = _load(reference, "reference")
    args, kwargs = _init_inputs(ref_module)
    out: dict[str, Any] = {"role": role}
    if role == "reference":
        model = _build(torch, ref_module.Model, args, kwargs, device)
        times = _time(torch, model, _inputs(torch, ref_module, SEED, device), device, trials)
        out.update(runtime_ms=statistics.mean(times), task_s=time.perf_counter() - t0)
        return out
    try:
        cand_module = _load(candidate, "candidate")
        new_model = _build(torch, cand_module.ModelNew, args, kwargs, device)
    except Exception as e:  # KernelGYM: compiled=False covers import, syntax and missing classes
        out.update(compiled=False, correct=False, error=f"{type(e).__name__}: {e}", task_s=time.perf_counter() - t0)
        return out
    ref_model = _build(torch, ref_module.Model, args, kwargs, device)
    out["compiled"] = True
    _seed(torch, SEED)
    seeds = [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(correct_trials)]
    passed = 0
    try:
        with torch.no_grad():
            for seed in seeds:
                inputs = _inputs(torch, ref_module, seed, device)
                want = ref_model(*inputs)
                _sync(torch, device)
                got = new_model(*inputs)
                _sync(torch, device)
                if got.shape == want.shape and torch.allclose(want, got, atol=1e-2, rtol=1e-2):
                    passed += 1
    except Exception as e:
        out.update(correct=False, error=f"runtime: {type(e).__name__}: {e}", task_s=time.perf_counter() - t0)
        return out
    out["correct"] = passed == correct_trials
    out["correctness_trials"] = f"({passed} / {correct_trials})"
    if not out["correct"]:
        out["task_s"] = time.perf_counter() - t0
        return out
    inputs = _inputs(torch, ref_module, SEED, device)
    names = {k for k, v in vars(cand_module).items() if type(v).__name__ in {"JITFunction", "InterpretedFunction"}}
    if names and device == "cuda":
        launches = _triton_launches(new_model, inputs)
        out["decoy_kernel"] = launches == 0
        if out["decoy_kernel"]:
            out.update(runtime_ms=-1.0, task_s=time.perf_counter() - t0)
            return out
    times = _time(torch, new_model, inputs, device, trials)
    out["runtime_ms"] = statistics.mean(times)
    if profile_coverage and device == "cuda":
        out["coverage"] = _coverage(torch, new_model, inputs, names)
    out["task_s"] = time.perf_counter() - t0
    return out


def _task_process(
    role: str,
    reference: str,
    candidate: str | None,
    device: str,
    trials: int,
    correct_trials: int,
    profile_coverage: bool,
    timeout_s: float,
) -> dict[str, Any]:
    """One fresh interpreter per task, like KernelGYM's spawn-per-task worker pool."""
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--role",
        role,
        "--reference",
        reference,
        "--device",
        device,
        "--trials",
        str(trials),
        "--correct-trials",
        str(correct_trials),
    ]
    if candidate:
        cmd += ["--candidate", candidate]
    if profile_coverage:
        cmd.append("--profile")
    env = dict(os.environ)
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return {"role": role, "error": "timeout"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"role": role, "error": f"exit {proc.returncode}: {proc.stderr[-500:]}"}
    return json.loads(lines[-1])


def evaluate(
    reference: str,
    candidate: str,
    device: str,
    trials: int = 100,
    correct_trials: int = 5,
    profile_coverage: bool = True,
    timeout_s: float = 300.0,
) -> dict[str, Any]:
    """Kernel task, then (if compiled and correct) the reference task, combined as KernelGYM does."""
    t0 = time.perf_counter()
    kernel = _task_process("kernel", reference, candidate, device, trials, correct_trials, profile_coverage, timeout_s)
    result: dict[str, Any] = {"kernel": kernel, "speedup": 0.0, "ref_runtime_ms": -1.0}
    if kernel.get("correct") and kernel.get("runtime_ms", -1) > 0:
        ref = _task_process("reference", reference, None, device, trials, correct_trials, False, timeout_s)
        result["reference"] = ref
        if ref.get("runtime_ms", -1) > 0:
            result["ref_runtime_ms"] = ref["runtime_ms"]
            result["speedup"] = ref["runtime_ms"] / kernel["runtime_ms"]
    result["elapsed_s"] = time.perf_counter() - t0
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--role", choices=["kernel", "reference"], required=True)
    p.add_argument("--reference", required=True)
    p.add_argument("--candidate")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    p.add_argument("--trials", type=int, default=100)
    p.add_argument("--correct-trials", type=int, default=5)
    p.add_argument("--profile", action="store_true", help="profile coverage after timing (CUDA only)")
    a = p.parse_args()
    if a.role == "kernel" and not a.candidate:
        p.error("--role kernel needs --candidate")
    print(json.dumps(run_task(a.role, a.reference, a.candidate, a.device, a.trials, a.correct_trials, a.profile)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
