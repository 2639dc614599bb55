"""Runtime check that reference sources load: exec each one in a child process with torch.

A source passes when exec-ing it defines an `nn.Module` subclass named after the entry point and
callable `get_inputs`/`get_init_inputs`. Neither is called: KernelBench inputs can be gigabytes.
One child process checks every source (torch is imported once), so the cost is one torch import
plus the module bodies. The child never shares memory with the caller, so a source that crashes
or hangs costs a report, not the caller.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

_CHILD = r"""
import json, sys, traceback
import torch.nn as nn
items = [json.loads(line) for line in sys.stdin]  # read all first: a source may touch stdin
for item in items:
    ns = {"__name__": "reference_under_check"}
    try:
        exec(compile(item["source"], item["key"], "exec"), ns)
        model = ns.get(item["entry_point"])
        problems = []
        if not (isinstance(model, type) and issubclass(model, nn.Module)):
            problems.append(f"{item['entry_point']} is not an nn.Module subclass")
        problems += [f"{f} is not callable" for f in ("get_inputs", "get_init_inputs") if not callable(ns.get(f))]
        error = "; ".join(problems) or None
    except BaseException as e:
        error = " ".join("".join(traceback.format_exception_only(type(e), e)).split())
    print(json.dumps({"key": item["key"], "error": error}), flush=True)
"""


class CheckerFailed(RuntimeError):
    """The checking process itself failed (not a verdict on any one source)."""


def check_loadable(
    sources: dict[str, str], entry_point: str = "Model", timeout_s: float = 300.0
) -> dict[str, str | None]:
    """key -> None when the source loads, else the error. `sources` maps a key (the path) to code."""
    if not sources:
        return {}
    payload = "".join(
        json.dumps({"key": k, "source": s, "entry_point": entry_point}) + "\n" for k, s in sources.items()
    )
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "PYTHONPATH")}
    # No accelerator and no network: a reference that fetches a model config fails fast, not after retries.
    env.update(OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD],
            input=payload,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
        )
    except subprocess.TimeoutExpired as e:
        done = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        raise CheckerFailed(f"load check timed out after {timeout_s:.0f}s; {_progress(done, sources)}") from None
    results = _parse(proc.stdout)
    if len(results) < len(sources):
        raise CheckerFailed(
            f"load check process exited with {proc.returncode}; {_progress(proc.stdout, sources)}; "
            f"stderr: {proc.stderr.strip()[-500:]}"
        )
    return results


def _parse(stdout: str) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for line in stdout.splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue  # a reference printed to stdout at import time
        if isinstance(item, dict) and set(item) == {"key", "error"}:
            out[item["key"]] = item["error"]
    return out


def _progress(stdout: str, sources: dict[str, str]) -> str:
    """Which source the child was on when it died (the first one without a result)."""
    done = _parse(stdout)
    pending = [k for k in sources if k not in done]
    return f"{len(done)} of {len(sources)} checked, stopped at {pending[0]}" if pending else "all checked"
