"""The `drkernel` command: one subcommand per entry-point module.

Each module named in COMMANDS exposes `add_arguments(parser)` and `run(args) -> int`. Modules are
imported only when their subcommand runs, so `drkernel verify` never pays for Ray or transformers.
Usage errors exit 2 with one line on stderr and no traceback (with `--json`, also one JSON object on stdout).
Log lines and progress go to stderr (drkernel.log), as text or, with `--log-json`, as JSON lines; stdout
carries only results.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

from drkernel.log import FORMAT_ENV, setup_logging

COMMANDS: dict[str, tuple[str, str]] = {
    "verify": ("pipelines.verify", "verify a candidate Triton kernel against a KernelBench reference"),
    "serve": ("pipelines.serve", "run a Ray Serve application (the verifier HTTP endpoint)"),
    "prepare-data": ("pipelines.prepare_data", "turn a folder of KernelBench references into parquet rows"),
    "sft": ("pipelines.sft", "cold-start supervised fine-tuning"),
    "train": ("pipelines.train", "asynchronous multi-turn RL on Ray (policy + verifier on Serve, actors)"),
    "eval": ("pipelines.evaluate", "measure a policy: fast@p per turn, pass@k, hack rates (KernelBench's way)"),
    "demo": ("pipelines.demo", "the embedded default end to end on a laptop CPU: SFT warm start, async RL, plots"),
    "report": ("pipelines.report", "one self-contained report.html of a run or eval folder (trajectory browser)"),
}


class UsageError(Exception):
    """Bad command-line input: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would print usage + exit 2; keep it to one line
        raise UsageError(f"{self.prog}: {message}")


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The parser; only the `selected` subcommand's module is imported to add its arguments."""
    parser = _Parser(prog="drkernel", description="DR.Kernel on Ray: RL for fast, correct Triton kernels")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        p.add_argument(
            "--log-json", action="store_true", help=f"log lines on stderr as JSON objects (also {FORMAT_ENV}=json)"
        )
        if name == selected:
            importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser(argv[0] if argv else None).parse_args(argv)
        if not getattr(args, "command", None):
            raise UsageError("drkernel: choose a command: " + ", ".join(COMMANDS))
        if args.log_json:
            os.environ[FORMAT_ENV] = "json"  # the stages this command starts log the same way
        setup_logging()
        return int(importlib.import_module(args._module).run(args) or 0)
    except UsageError as e:
        print(str(e), file=sys.stderr)
        if "--json" in argv:  # stdout was promised exactly one JSON object: a usage error is one too
            print(json.dumps({"status": "usage_error", "error": {"kind": "usage", "message": str(e)}}))
        return 2


if __name__ == "__main__":
    # Run through the importable module so subcommands raise the same UsageError class we catch.
    from pipelines.cli import main as _main

    sys.exit(_main())
