"""One place for log lines and progress: human-readable by default, JSON lines on request, all on stderr.

stdout stays for results (`drkernel verify --json` prints exactly one object there). JSON lines are asked
for with `setup_logging(json_lines=True)`, the `--log-json` flag of every `drkernel` command, or
`DRKERNEL_LOG_FORMAT=json` in the environment. A progress bar (tqdm) is drawn only when stderr is a terminal,
and log lines written meanwhile go above it; elsewhere (a Ray job log, a pipe) it becomes a log line every
`every_s` seconds and at the end, so `ray job logs` does not fill with carriage returns.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import time
import warnings
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_ROOT = "drkernel"
FORMAT_ENV = "DRKERNEL_LOG_FORMAT"
LEVEL_ENV = "DRKERNEL_LOG_LEVEL"


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(getattr(record, "fields", {}) or {})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def setup_logging(json_lines: bool | None = None, level: int | str | None = None) -> None:
    """Route the project's loggers to stderr, as text or as JSON lines; safe to call again.

    `None` reads the environment (`DRKERNEL_LOG_FORMAT=json`, `DRKERNEL_LOG_LEVEL=DEBUG`), so a flag given to
    the command reaches the stages it starts."""
    if json_lines is None:
        json_lines = os.environ.get(FORMAT_ENV, "").lower() == "json"
    if level is None:
        level = os.environ.get(LEVEL_ENV, "INFO").upper()
    root = logging.getLogger(_ROOT)
    root.handlers.clear()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        _JsonFormatter()
        if json_lines
        else logging.Formatter("%(asctime)s %(levelname).1s %(name)s: %(message)s", datefmt="%H:%M:%S")
    )
    root.addHandler(handler)
    root.setLevel(level)
    root.propagate = False


def serve_logging_config(verbose: bool) -> dict[str, Any]:
    """Ray Serve `logging_config` of the apps the project deploys: a line per request only when asked for
    (`--verbose`); otherwise access lines (`CALL verify OK 13.0ms`) bury the progress (409 of a demo's 585 lines)."""
    return {"enable_access_log": verbose}


# Library notices that tell a user of this project nothing: verl announcing each optional training engine it could
# not import, and verl's platform probe saying a CPU-only actor has no GPU.
_NOTICES = (
    ("verl.workers.engine", r".* engine is not available"),
    ("verl.plugin.platform.platform_manager", r"No supported accelerator detected|.* is registered but not available"),
)


class _DropMatching(logging.Filter):
    def __init__(self, pattern: str) -> None:
        super().__init__()
        self.pattern = re.compile(pattern)

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.match(record.getMessage())


def quiet_libraries() -> None:
    """Drop the library notices above in this process (before or after the libraries are imported); kept when
    DRKERNEL_LOG_LEVEL=DEBUG. Called where the Ray layer's modules load, so every actor and replica is quiet."""
    if os.environ.get(LEVEL_ENV, "").upper() == "DEBUG":
        return
    for module, pattern in _NOTICES:
        warnings.filterwarnings("ignore", message=pattern, category=UserWarning, module=re.escape(module))
        target = logging.getLogger(module)
        if not any(isinstance(f, _DropMatching) for f in target.filters):
            target.addFilter(_DropMatching(pattern))


def get_logger(name: str) -> logging.Logger:
    """A logger under the project's root, e.g. get_logger("train") -> "drkernel.train"."""
    return logging.getLogger(name if name.startswith(_ROOT) else f"{_ROOT}.{name}")


class Progress:
    """Progress of a loop the caller advances with `update()`: a tqdm bar on a terminal, else a log line every
    `every_s` seconds and one when it closes. Use it as a context manager."""

    def __init__(self, total: int | None = None, desc: str = "", every_s: float = 10.0, initial: int = 0) -> None:
        self.total, self.desc, self.every_s = total, desc, every_s
        self.done = self.initial = initial
        self._start = self._last = time.monotonic()
        self._bar: Any = None
        self._redirect: contextlib.ExitStack | None = None
        self._closed = False
        if sys.stderr.isatty():
            from tqdm import tqdm
            from tqdm.contrib.logging import logging_redirect_tqdm

            self._redirect = contextlib.ExitStack()
            self._redirect.enter_context(logging_redirect_tqdm(loggers=[logging.getLogger(_ROOT)]))
            self._bar = tqdm(total=total, desc=desc, initial=initial, file=sys.stderr, dynamic_ncols=True)

    def update(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.monotonic()
        if now - self._last >= self.every_s:
            self._line(now)

    def _line(self, now: float) -> None:
        rate = (self.done - self.initial) / max(now - self._start, 1e-9)
        total = self.total if self.total is not None else "?"
        eta = ""
        if self.total is not None and rate > 0:
            eta = f", ETA {round((self.total - self.done) / rate)}s"
        get_logger("progress").info("%s %d/%s (%.2f/s%s)", self.desc, self.done, total, rate, eta)
        self._last = now

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
            if self._redirect is not None:
                self._redirect.close()
        else:
            self._line(time.monotonic())

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(items: Iterable[T], total: int | None = None, desc: str = "", every_s: float = 10.0) -> Iterator[T]:
    """Iterate `items` with a Progress (bar on a terminal, periodic log lines elsewhere)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with Progress(total, desc, every_s) as bar:
        for item in items:
            yield item
            bar.update()


def kv(fields: dict[str, Any]) -> str:
    """`a=1 b=0.25` for a human log line; floats to 4 significant digits."""
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in fields.items())
