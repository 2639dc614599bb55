"""The evaluation's records on disk: one JSON line per finished task, so a run stopped anywhere resumes.

A task's line is written (and fsynced) only once all its samples are done, so a task is either fully in the file
or not at all; a resumed run skips the tasks the file holds and a task is never counted twice. A line cut short
by a crash is dropped (and cut from the file) and its task runs again. `run.json` pins the settings that shape the
numbers: resuming with different ones is refused instead of mixing two evaluations in one report.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from drkernel.eval.metrics import SampleRecord

RECORDS = "records.jsonl"
SETTINGS = "run.json"


class SettingsMismatch(ValueError):
    """The folder holds an evaluation made with other settings."""


class RecordStore:
    """records.jsonl + run.json in `folder`."""

    def __init__(self, folder: str | Path, settings: dict[str, Any]) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / RECORDS
        pinned = self.folder / SETTINGS
        if pinned.is_file():
            before = json.loads(pinned.read_text())
            changed = sorted(k for k in set(before) | set(settings) if before.get(k) != settings.get(k))
            if changed:
                raise SettingsMismatch(
                    f"{self.folder} holds an evaluation with other settings ({', '.join(changed)}); "
                    "use another --out or the same settings"
                )
        else:
            pinned.write_text(json.dumps(settings, indent=2, sort_keys=True))
        self.done: dict[str, list[SampleRecord]] = {}
        self.dropped_partial = 0
        self._load()

    def _load(self) -> None:
        if not self.path.is_file():
            return
        good_bytes = 0
        with self.path.open("rb") as f:
            for raw in f:
                try:
                    line = json.loads(raw)
                    records = [SampleRecord.from_json(s) for s in line["samples"]]
                except (ValueError, KeyError, TypeError):
                    self.dropped_partial += 1
                    break  # only the last line can be cut short; nothing after it is trusted
                if not raw.endswith(b"\n"):
                    self.dropped_partial += 1
                    break
                good_bytes += len(raw)
                self.done.setdefault(line["task"], records)
        if self.dropped_partial:
            with self.path.open("r+b") as f:
                f.truncate(good_bytes)

    def add(self, task: str, records: list[SampleRecord]) -> None:
        """Append one finished task; a task already stored is refused (it would be counted twice)."""
        if task in self.done:
            raise ValueError(f"task {task} is already in {self.path}")
        with self.path.open("a") as f:
            f.write(json.dumps({"task": task, "samples": [r.to_json() for r in records]}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.done[task] = records

    def records(self) -> list[SampleRecord]:
        return [r for records in self.done.values() for r in records]
