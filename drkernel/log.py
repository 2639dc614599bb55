"""One place for log lines and progress: human-readable by default, JSON lines on request, all on stderr.

stdout stays for results (`drkernel verify --json` prints exactly one object there). A progress bar is drawn
only when stderr is a terminal; in a Ray job log (not a terminal) it becomes a line every `every_s` seconds, so
logs stay readable and `ray job logs` does not fill with carriage returns.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_ROOT = "drkernel"


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"ts": round(record.created, 3), "level": record.levelname.lower(), "logger": record.name,
                 "msg": record.getMessage()}
        entry.update(getattr(record, "fields", {}) or {})
        return json.dumps(entry, default=str)


def setup_logging(json_lines: bool = False, level: int = logging.INFO) -> None:
    """Route the project's loggers to stderr, as text or as JSON lines; safe to call again."""
    root = logging.getLogger(_ROOT)
    root.handlers.clear()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if json_lines else logging.Formatter(
        "%(asctime)s %(levelname).1s %(name)s: %(message)s", datefmt="%H:%M:%S"))
    root.addHandler(handler)
    root.setLevel(level)
    root.propagate = False


def get_logger(name: str) -> logging.Logger:
    """A logger under the project's root, e.g. get_logger("train") -> "drkernel.train"."""
    return logging.getLogger(name if name.startswith(_ROOT) else f"{_ROOT}.{name}")


def progress(items: Iterable[T], total: int | None = None, desc: str = "", every_s: float = 10.0) -> Iterator[T]:
    """Iterate with a tqdm bar on a terminal, or a periodic log line (done/total, rate) elsewhere."""
    if sys.stderr.isatty():
        from tqdm import tqdm

        yield from tqdm(items, total=total, desc=desc, file=sys.stderr, dynamic_ncols=True)
        return
    log = get_logger("progress")
    start = last = time.monotonic()
    done = 0
    for item in items:
        yield item
        done += 1
        now = time.monotonic()
        if now - last >= every_s or (total is not None and done == total):
            rate = done / max(now - start, 1e-9)
            log.info("%s %d/%s (%.2f/s)", desc, done, total if total is not None else "?", rate)
            last = now


def kv(fields: dict[str, Any]) -> str:
    """`a=1 b=0.25` for a human log line; floats to 4 significant digits."""
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in fields.items())
