"""`drkernel prepare-data`: folders of KernelBench-format references -> a prompt-pool parquet file.

Every reference is checked twice: statically (it parses and defines Model/get_inputs/
get_init_inputs) and by exec-ing it in a child process with torch (skippable with
--no-load-check). A bad file stops the run and nothing is written, unless --skip-invalid is given;
then the good rows are written and every skipped file is named on stderr. Exit status: 0 written,
1 invalid references (or none left), 2 usage errors.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from drkernel.data.kernelbench import ReferenceFileError, ReferenceSource, build_row, discover
from drkernel.data.reader import write_rows
from drkernel.data.reference_check import CheckerFailed, check_loadable
from drkernel.data.schema import TaskRow
from pipelines.cli import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--src", action="append", required=True, metavar="DIR",
                        help="folder of <id>_<Name>.py references or of <task>/reference.py folders; repeatable")
    parser.add_argument("--out", required=True, metavar="FILE.parquet", help="parquet file to write")
    parser.add_argument("--level", type=int, default=None,
                        help="level of every row (default: task.yaml, else a levelN folder name, else none)")
    parser.add_argument("--data-source", default="kernelbench", help="data_source column value")
    parser.add_argument("--prompt-style", choices=["full", "compact"], default="full",
                        help="first-turn template: full (KernelBench-style, one-shot) or compact")
    parser.add_argument("--entry-point", default="Model", help="reference class name")
    parser.add_argument("--skip-invalid", action="store_true",
                        help="write the valid rows and report the invalid files instead of failing")
    parser.add_argument("--no-load-check", action="store_true",
                        help="skip exec-ing each reference in a child process (static checks still run)")
    parser.add_argument("--load-timeout", type=float, default=600.0, help="seconds for the whole load check")


def _build(refs: list[ReferenceSource], args: argparse.Namespace) -> tuple[dict[str, TaskRow], list[str]]:
    """Rows keyed by their source path, plus the problems of the references that fail statically."""
    rows: dict[str, TaskRow] = {}
    problems: list[str] = []
    for ref in refs:
        try:
            rows[str(ref.path)] = build_row(ref, args.data_source, args.prompt_style, args.entry_point)
        except ReferenceFileError as e:
            problems.append(str(e))
    return rows, problems


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.suffix != ".parquet":
        raise UsageError(f"prepare-data: --out must name a .parquet file, got {out}")
    if args.level is not None and args.level < 1:
        raise UsageError(f"prepare-data: --level must be >= 1, got {args.level}")
    refs: list[ReferenceSource] = []
    problems: list[str] = []
    for src in args.src:
        try:
            found, errors = discover(src, args.level)
        except ReferenceFileError as e:
            raise UsageError(f"prepare-data: {e}") from None
        refs += found
        problems += [str(e) for e in errors]
    rows, build_problems = _build(refs, args)
    problems += build_problems
    if rows and not args.no_load_check:
        sources = {path: row.reference_code for path, row in rows.items()}
        try:
            verdicts = check_loadable(sources, args.entry_point, args.load_timeout)
        except CheckerFailed as e:
            print(f"prepare-data: {e}", file=sys.stderr)
            return 1
        for path, error in verdicts.items():
            if error is not None:
                problems.append(f"{path}: does not load: {error}")
                del rows[path]
    for problem in problems:
        print(f"invalid reference: {problem}", file=sys.stderr)
    if problems and not args.skip_invalid:
        print(f"prepare-data: {len(problems)} invalid reference(s), nothing written "
              "(fix them or pass --skip-invalid)", file=sys.stderr)
        return 1
    if not rows:
        print("prepare-data: no valid references left, nothing written", file=sys.stderr)
        return 1
    write_rows(list(rows.values()), out)
    levels = Counter(row.extra_info.level for row in rows.values())
    per_level = ", ".join(f"level {lv}: {n}" for lv, n in sorted(levels.items(), key=lambda kv: str(kv[0])))
    skipped = f", skipped {len(problems)} invalid" if problems else ""
    print(f"wrote {len(rows)} rows to {out} ({per_level}){skipped}")
    return 0
