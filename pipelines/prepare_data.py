"""`drkernel prepare-data`: folders of KernelBench-format references -> a prompt-pool parquet file;
`drkernel prepare-data --check PATH`: validate an existing pool (a file or a folder of them).

Build mode: every reference is checked twice, statically (it parses and defines Model/get_inputs/
get_init_inputs, without running it) and by exec-ing it in a child process under the verifier's
sandbox (skippable with --no-load-check); it is never imported in this process. A bad file stops the
run and nothing is written, unless --skip-invalid is given; then the good rows are written and every
skipped file is named on stderr. An existing output is overwritten only with --force.

Check mode: one validation pass over every row prints the row count, each bad row (file, row, uuid,
field) and, with --tokenizer, percentiles of the prompts' token lengths (cached for the prompt
stream's length filter, see drkernel.data.lengths).

Exit status: 0 written / all rows valid, 1 invalid references or rows, 2 usage errors.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from drkernel.data.kernelbench import ReferenceFileError, ReferenceSource, build_row, discover
from drkernel.data.lengths import PromptLengths, percentiles
from drkernel.data.reader import DataFormatError, scan, write_rows
from drkernel.log import get_logger, progress
from drkernel.types.task_row import TaskRow
from drkernel.verify.reference_check import CheckerFailed, check_loadable
from pipelines.cli import UsageError

log = get_logger("prepare_data")

_SHOWN_BAD_ROWS = 50  # bad rows printed one per line by --check; the rest are counted


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--check",
        metavar="PATH",
        default=None,
        help="validate an existing prompt pool (parquet file or folder) instead of building one",
    )
    parser.add_argument(
        "--tokenizer",
        metavar="NAME_OR_DIR",
        default=None,
        help="with --check: report prompt token lengths for this (policy) tokenizer",
    )
    parser.add_argument(
        "--max-prompt-tokens",
        type=int,
        default=None,
        help="with --check --tokenizer: also count the prompts longer than this",
    )
    parser.add_argument(
        "--src",
        action="append",
        metavar="DIR",
        help="folder of <id>_<Name>.py references or of <task>/reference.py folders; repeatable",
    )
    parser.add_argument("--out", metavar="FILE.parquet", help="parquet file to write")
    parser.add_argument("--force", action="store_true", help="overwrite --out when it already exists")
    parser.add_argument(
        "--level",
        type=int,
        default=None,
        help="level of every row (default: task.yaml, else a levelN folder name, else none)",
    )
    parser.add_argument("--data-source", default="kernelbench", help="data_source column value")
    parser.add_argument(
        "--prompt-style",
        choices=["full", "compact"],
        default="full",
        help="first-turn template: full (KernelBench-style, one-shot) or compact",
    )
    parser.add_argument("--entry-point", default="Model", help="reference class name")
    parser.add_argument(
        "--skip-invalid",
        action="store_true",
        help="write the valid rows and report the invalid files instead of failing",
    )
    parser.add_argument(
        "--no-load-check",
        action="store_true",
        help="skip exec-ing each reference in a sandboxed child process (static checks still run)",
    )
    parser.add_argument("--load-timeout", type=float, default=600.0, help="seconds for the whole load check")


def _build(refs: list[ReferenceSource], args: argparse.Namespace) -> tuple[dict[str, TaskRow], list[str]]:
    """Rows keyed by their source path, plus the problems of the references that fail statically."""
    rows: dict[str, TaskRow] = {}
    problems: list[str] = []
    for ref in progress(refs, desc="references parsed"):
        try:
            rows[str(ref.path)] = build_row(ref, args.data_source, args.prompt_style, args.entry_point)
        except ReferenceFileError as e:
            problems.append(str(e))
    return rows, problems


def _load_tokenizer(name: str) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(f"prepare-data: cannot load tokenizer {name!r}: {first}") from None


def check(args: argparse.Namespace) -> int:
    """Validate a pool: rows, bad rows (file, row, uuid, field), token-length percentiles; 1 when any row is bad."""
    if args.src or args.out:
        raise UsageError("prepare-data: --check validates a pool; it takes no --src or --out")
    if args.max_prompt_tokens is not None and (args.tokenizer is None or args.max_prompt_tokens < 1):
        raise UsageError("prepare-data: --max-prompt-tokens needs --tokenizer and a value >= 1")
    tokenizer = _load_tokenizer(args.tokenizer) if args.tokenizer else None
    try:
        result = scan(args.check, skip_invalid=True, keep_tables=tokenizer is not None)
    except FileNotFoundError as e:
        raise UsageError(f"prepare-data: {e}") from None
    except DataFormatError as e:  # an unreadable file: nothing to count rows in
        log.error("prepare-data: %s", e)
        return 1
    print(
        f"{args.check}: {result.num_rows} rows in {len(result.files)} file(s), "
        f"{result.num_valid} valid, {result.num_invalid} invalid"
    )
    for error in result.errors[:_SHOWN_BAD_ROWS]:
        print(f"bad row: {error}")
    if len(result.errors) > _SHOWN_BAD_ROWS:
        print(f"bad rows: {len(result.errors) - _SHOWN_BAD_ROWS} more not shown")
    if tokenizer is not None:
        counter = PromptLengths(tokenizer)
        lengths = np.concatenate([counter.for_file(f.path, f.table, f.valid) for f in result.files])
        shown = ", ".join(f"{k} {v}" for k, v in percentiles(lengths).items())
        cached = "computed" if counter.computed else "from the cache"
        print(f"prompt tokens ({args.tokenizer}, {cached}): {shown}")
        if args.max_prompt_tokens is not None:
            over = int((lengths > args.max_prompt_tokens).sum())
            print(
                f"prompts longer than {args.max_prompt_tokens} tokens: {over} of {len(lengths)} "
                f"({100 * over / max(len(lengths), 1):.1f}%)"
            )
    return 1 if result.num_invalid else 0


def run(args: argparse.Namespace) -> int:
    if args.check is not None:
        return check(args)
    if args.tokenizer or args.max_prompt_tokens is not None:
        raise UsageError("prepare-data: --tokenizer and --max-prompt-tokens go with --check")
    missing = [flag for flag, value in (("--src", args.src), ("--out", args.out)) if not value]
    if missing:
        raise UsageError(f"prepare-data: the following arguments are required: {', '.join(missing)}")
    out = Path(args.out)
    if out.is_dir():
        raise UsageError(f"prepare-data: --out names a directory ({out}); give the path of a .parquet file")
    if out.suffix != ".parquet":
        raise UsageError(f"prepare-data: --out must name a .parquet file, got {out}")
    if out.exists() and not args.force:
        raise UsageError(f"prepare-data: {out} exists; pass --force to overwrite it")
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
        log.info("load-checking %d references in one sandboxed child (timeout %.0f s)", len(sources), args.load_timeout)
        try:
            loaded = check_loadable(sources, args.entry_point, args.load_timeout)
        except CheckerFailed as e:
            log.error("prepare-data: %s", e)
            return 1
        weak = {k: v for k, v in loaded.sandbox.items() if k == "namespaces" and not v.startswith("active")}
        for layer, state in weak.items():
            log.warning("prepare-data: load-check sandbox: %s %s", layer, state)
        for path, error in loaded.verdicts.items():
            if error is not None:
                problems.append(f"{path}: does not load: {error}")
                del rows[path]
    for problem in problems:
        log.warning("invalid reference: %s", problem)
    if problems and not args.skip_invalid:
        log.error(
            "prepare-data: %d invalid reference(s), nothing written (fix them or pass --skip-invalid)", len(problems)
        )
        return 1
    if not rows:
        log.error("prepare-data: no valid references left, nothing written")
        return 1
    write_rows(list(rows.values()), out)
    levels = Counter(row.extra_info.level for row in rows.values())
    per_level = ", ".join(f"level {lv}: {n}" for lv, n in sorted(levels.items(), key=lambda kv: str(kv[0])))
    skipped = f", skipped {len(problems)} invalid" if problems else ""
    print(f"wrote {len(rows)} rows to {out} ({per_level}){skipped}")
    return 0
