"""`drkernel verify`: judge one candidate file against one KernelBench reference file.

Exit status: 0 when a verdict was reached (pass or fail), 1 on an infra error (no verdict),
2 on a usage error, which includes a reference that does not parse, lacks Model/get_inputs/
get_init_inputs, or fails when run: the reference is the user's input, reported in one line.
With --json, stdout carries exactly one JSON object; the candidate's own output is captured inside
its sandbox and appears only as a tail in `details`. The reward shown is the recipe's (drkernel.rl.rewards.score
with the default RewardConfig, as the HTTP front prices a request that names none).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from pipelines.cli import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reference",
        required=True,
        metavar="REF.py",
        help="KernelBench reference (Model, get_inputs, get_init_inputs)",
    )
    parser.add_argument("--candidate", required=True, metavar="CAND.py", help="candidate module defining ModelNew")
    parser.add_argument(
        "--device", default="auto", choices=["auto", "cpu", "cuda", "npu"], help="where to run (default: auto)"
    )
    parser.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    parser.add_argument("--entry-point", default=None, help="reference class name (default: Model)")
    parser.add_argument(
        "--no-require-triton",
        action="store_true",
        help="accept candidates without Triton kernels (e.g. the reference against itself)",
    )
    parser.add_argument("--atol", type=float, default=None, help="absolute tolerance (default 1e-2)")
    parser.add_argument("--rtol", type=float, default=None, help="relative tolerance (default 1e-2)")
    parser.add_argument("--correct-trials", type=int, default=None, help="seeds of the correctness check (default 5)")
    parser.add_argument("--trials", type=int, default=None, help="timed calls per model (default 30; 5 on CPU)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed calls before timing (default 3; 1 on CPU)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds allowed for the evaluation (default 180)")
    parser.add_argument(
        "--timing",
        default=None,
        choices=["measured", "cpu_model"],
        help="measured: time both models on the device (default); cpu_model: on CPU, model GPU time from counted work",
    )
    parser.add_argument(
        "--gpu-profile", default=None, choices=["h200", "a100", "ascend910b"], help="GPU that --timing cpu_model prices"
    )
    parser.add_argument("--no-perf", action="store_true", help="skip timing (correctness and hack checks only)")
    parser.add_argument("--no-coverage", action="store_true", help="skip the coverage measurement")


def _read(path: str, what: str) -> str:
    if not os.path.isfile(path):
        raise UsageError(f"drkernel verify: {what} file not found: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"drkernel verify: cannot read {what} file {path}: {e}") from e


def _options(args: argparse.Namespace) -> Any:
    from pydantic import ValidationError

    from drkernel.config.verifier import VerifyOptions

    fields: dict[str, Any] = {"device": args.device}
    for flag, key in (
        ("entry_point", "entry_point"),
        ("atol", "atol"),
        ("rtol", "rtol"),
        ("correct_trials", "num_correct_trials"),
        ("trials", "num_perf_trials"),
        ("warmup", "num_warmup"),
        ("timeout", "timeout_s"),
        ("timing", "timing"),
        ("gpu_profile", "gpu_profile"),
    ):
        value = getattr(args, flag)
        if value is not None:
            fields[key] = value
    if args.no_require_triton:
        fields["require_triton"] = False
    if args.no_perf:
        fields["measure_performance"] = False
    if args.no_coverage:
        fields["measure_coverage"] = False
    try:
        return VerifyOptions(**fields)
    except ValidationError as e:
        err = e.errors()[0]
        raise UsageError(f"drkernel verify: bad value for {'.'.join(map(str, err['loc']))}: {err['msg']}") from None


def _fmt(value: float | None, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:.4g}{unit}"


def reward_note(result: Any) -> str | None:
    """What the reward says about a correct kernel slower than its reference (None for any other verdict)."""
    if not (result.correct and result.hack is None and result.speedup is not None and result.speedup < 1):
        return None
    from drkernel.config.algorithm import RewardConfig

    r = RewardConfig()
    return (
        f"reward: correct but slower than the reference ({result.speedup:.3g}x), so the speed term adds "
        f"{r.speedup_weight} x {result.speedup:.3g} = {r.speedup_weight * result.speedup:.3g} of a possible "
        f"{r.speedup_weight * r.speedup_cap:g}; the reward ({r.correct_weight:g} correct + speed + "
        f"{r.coverage_weight:g} x coverage) still beats any wrong kernel's 0, and a faster kernel earns more"
    )


def report(result: Any) -> str:
    """Short human-readable verdict (a priced one: it shows the reward)."""
    if result.status != "ok":
        return f"INFRA ERROR ({result.error.kind}): {result.error.message}"
    verdict = "PASS" if result.correct and result.hack is None else "FAIL"
    lines = [
        f"{verdict}  device={result.device}  compiled={result.compiled}  correct={result.correct}  "
        f"hack={result.hack or 'none'}  reward={result.reward:.4g}"
    ]
    if result.error is not None:
        lines.append(f"error ({result.error.kind}): {result.error.message}")
    if result.runtime_ms is not None:
        lines.append(
            f"runtime {_fmt(result.runtime_ms, ' ms')} vs reference {_fmt(result.ref_runtime_ms, ' ms')}  "
            f"speedup {_fmt(result.speedup, 'x')}  coverage {_fmt(result.coverage)}  ({result.timing_source})"
        )
    for check in result.checks:
        mark = "ok " if check.passed else "BAD"
        lines.append(f"  [{mark}] {check.name}{': ' + check.detail if check.detail else ''}")
    slow = reward_note(result)
    if slow:
        lines.append(slow)
    note = result.details.get("timing_note")
    if note:
        lines.append(f"note: {note}")
    lines.append(f"elapsed {result.elapsed_s:.2f} s")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    reference = _read(args.reference, "reference")
    candidate = _read(args.candidate, "candidate")
    options = _options(args)
    from drkernel.verify.static.reference_source import one_line, reference_problem

    problem = reference_problem(reference, options.entry_point)
    if problem is not None:
        raise UsageError(f"drkernel verify: {args.reference}: {problem}")
    from drkernel.verify.engine import verify

    result = verify(reference, candidate, options)
    if result.status != "ok" and result.error is not None and result.error.kind in ("usage", "reference"):
        raise UsageError(f"drkernel verify: {args.reference}: {one_line(result.error.message)}")
    from drkernel.config.algorithm import RewardConfig
    from serve_apps.verifier_schemas import VerifyResponse

    priced = VerifyResponse.priced(result, RewardConfig())  # the recipe's reward, as the HTTP front's default
    if args.json:
        sys.stdout.write(json.dumps(priced.model_dump(mode="json")) + "\n")
    else:
        print(report(priced))
    sys.stdout.flush()
    return 0 if result.status == "ok" else 1
