"""Mutation testing of the pure core with mutmut 3: what share of small planted bugs do the tests catch?

A benchmark, not a CI step (minutes per module on 2 cores). Each module runs in its own scratch copy
of the repository (drkernel/, pipelines/, the conftests and helpers of tests/, and only that module's
fast tests), so the checkout is never mutated and each module gets its own `[tool.mutmut]` section.
One mutmut process at a time, one child (`--max-children 1`), a per-test timeout.

    .venv/bin/pip install mutmut                     # 3.x; not a project dependency
    .venv/bin/python benchmarks/mutation.py          # every module below
    .venv/bin/python benchmarks/mutation.py rl/prs rl/rewards --children 2

Per module it prints killed / survived / timeout / no-tests counts and the score
killed_or_timeout / (all - no_tests), writes the summary to <workdir>/summary.json and each
survivor's diff to <workdir>/<module>/survivors.diff (to judge which survivors are equivalent).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# module under drkernel/ -> its own fast tests
MODULES: dict[str, list[str]] = {
    "rl/rewards": ["tests/rl/test_rewards.py", "tests/rl/test_reward_pins.py"],
    "rl/prs": ["tests/rl/test_prs.py", "tests/rl/test_reward_pins.py"],
    "rl/trloo": ["tests/rl/test_trloo.py", "tests/rl/test_unbiased.py", "tests/rl/test_rl_edges.py"],
    "rl/mrs": ["tests/rl/test_mrs.py", "tests/rl/test_rl_edges.py"],
    "rl/filters": ["tests/rl/test_filters.py", "tests/rl/test_rl_edges.py"],
    "rl/loss": ["tests/rl/test_loss.py", "tests/rl/test_rl_edges.py"],
    "rl/staleness": ["tests/rl/test_staleness.py", "tests/rl/test_rl_edges.py"],
    "types/task_row": ["tests/types/test_task_row.py", "tests/data/test_reader.py"],
    "data/prompts": ["tests/data/test_prompt_templates.py"],
    "data/stream": ["tests/data/test_stream.py"],
    # the verifier's comparison and verdict code (in-process tests only: a judge subprocess would import
    # the unmutated copy, so verifier-level tests cannot kill these mutants)
    "verify/judging/tensors": [
        "tests/verify/judging/test_tensors.py",
        "tests/verify/judging/test_comparison_pins.py",
        "tests/verify/judging/test_timing_symmetry.py::test_batched_comparison_never_passes_what_compare_fails",
    ],
    "verify/verdict": ["tests/verify/test_verdict.py", "tests/rl/test_reward_pins.py"],
    "verify/judging/outputs": [
        "tests/verify/judging/test_comparison_pins.py",
        "tests/verify/judging/test_timing_symmetry.py::test_batched_comparison_never_passes_what_compare_fails",
    ],
}

# modules whose other functions need a GPU or a whole verifier run: only these functions are mutated
ONLY_FUNCTIONS: dict[str, list[str]] = {
    "verify/judging/outputs": ["batch_passes", "specs", "spec_mismatch"],
}


def _ignore(_dir: str, names: list[str]) -> set[str]:
    return {n for n in names if n in ("__pycache__", ".hypothesis", ".pytest_cache") or n.endswith(".pyc")}


def make_scratch(module: str, tests: list[str], root: Path, test_timeout_s: int, timeout_multiplier: float) -> Path:
    """A minimal copy of the repository for one module, with its own mutmut and pytest settings."""
    scratch = root / module.replace("/", "_")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    for package in ("drkernel", "pipelines"):
        shutil.copytree(REPO / package, scratch / package, ignore=_ignore)
    # conftests and helper modules of tests/ (no test files), then the selected test files
    for helper in (REPO / "tests").rglob("*.py"):
        if not helper.name.startswith("test_") and "__pycache__" not in helper.parts:
            target = scratch / helper.relative_to(REPO)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(helper, target)
    for test in {t.partition("::")[0] for t in tests}:
        target = scratch / test
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / test, target)
    # conftest finds ../shared beside the checkout; mutmut runs the tests inside scratch/mutants
    shared = REPO.parent / "shared"
    if shared.is_dir():
        (root / "shared").unlink(missing_ok=True)
        (root / "shared").symlink_to(shared)
        (scratch / "shared").symlink_to(shared)
    selection = ", ".join(json.dumps(t) for t in tests)
    (scratch / "pyproject.toml").write_text(
        "[tool.mutmut]\n"
        'source_paths = ["drkernel"]\n'
        f'only_mutate = ["drkernel/{module}.py"]\n'
        f"pytest_add_cli_args_test_selection = [{selection}]\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q"]\n'
        'process_isolation = "forkserver"\n'
        "use_git_change_detection = false\n"
        f"timeout_multiplier = {timeout_multiplier}\n"
        "\n[tool.pytest.ini_options]\n"
        f"timeout = {test_timeout_s}\n"
    )
    return scratch


def _mutmut(scratch: Path, *args: str, timeout_s: float | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(scratch)}
    exe = Path(sys.executable).with_name("mutmut")
    return subprocess.run([str(exe), *args], cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout_s)


def run_module(module: str, root: Path, children: int, test_timeout_s: int, timeout_multiplier: float) -> dict:
    """mutmut run on one module in its scratch copy; counts, score and every survivor's diff."""
    scratch = make_scratch(module, MODULES[module], root, test_timeout_s, timeout_multiplier)
    start = time.monotonic()
    dotted = "drkernel." + module.replace("/", ".")
    names = [f"{dotted}.x_{fn}__mutmut_*" for fn in ONLY_FUNCTIONS.get(module, [])]
    run = _mutmut(scratch, "run", "--max-children", str(children), *names)
    elapsed = time.monotonic() - start
    (scratch / "run.log").write_text(run.stdout + run.stderr)
    statuses: dict[str, str] = {}
    for line in _mutmut(scratch, "results", "--all", "true").stdout.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name and (not names or any(fnmatch.fnmatch(name, n) for n in names)):
            statuses[name] = status
    if run.returncode != 0 or not statuses:
        raise RuntimeError(f"{module}: mutmut run failed (rc {run.returncode}); see {scratch / 'run.log'}")
    counts: dict[str, int] = {}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    survivors = sorted(n for n, s in statuses.items() if s not in ("killed", "timeout", "no tests"))
    with open(scratch / "survivors.diff", "w") as out:
        for name in survivors:
            out.write(_mutmut(scratch, "show", name).stdout + "\n")
    tested = len(statuses) - counts.get("no tests", 0)
    caught = counts.get("killed", 0) + counts.get("timeout", 0)
    return {
        "module": module,
        "tests": MODULES[module],
        "counts": counts,
        "score": caught / tested if tested else None,
        "survivors": survivors,
        "elapsed_s": round(elapsed, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", help=f"modules under drkernel/ (default all): {', '.join(MODULES)}")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/drkernel-mutation"), help="scratch copies")
    parser.add_argument("--children", type=int, default=1, help="mutants tested in parallel")
    parser.add_argument("--test-timeout", type=int, default=120, help="pytest-timeout per test, seconds")
    parser.add_argument(
        "--timeout-multiplier",
        type=float,
        default=4.0,
        help="a mutant's CPU limit is 2 x this x (its tests' clean time + 1 s); mutmut's default is 15",
    )
    args = parser.parse_args()
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {unknown}; known: {list(MODULES)}")
    args.workdir.mkdir(parents=True, exist_ok=True)
    summary_path = args.workdir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    for module in args.modules or list(MODULES):
        result = run_module(module, args.workdir, args.children, args.test_timeout, args.timeout_multiplier)
        summary[module] = result
        summary_path.write_text(json.dumps(summary, indent=1))
        score = "n/a" if result["score"] is None else f"{100 * result['score']:.1f}%"
        print(
            f"{module}: {score} {result['counts']} in {result['elapsed_s']} s; "
            f"{len(result['survivors'])} survivor(s) in {args.workdir / module.replace('/', '_')}/survivors.diff",
            flush=True,
        )


if __name__ == "__main__":
    main()
