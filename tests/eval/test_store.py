"""Resuming an evaluation: whole tasks only, a cut last line dropped, other settings refused."""

from __future__ import annotations

import json

import pytest

from drkernel.eval.metrics import SampleRecord, TurnOutcome
from drkernel.eval.store import RecordStore, SettingsMismatch

SETTINGS = {"policy": "p", "eval": {"samples_per_task": 2}}


def recs(task: str) -> list[SampleRecord]:
    return [
        SampleRecord(task, i, [TurnOutcome(status="ok", correct=True, compiled=True, speedup=1.5)]) for i in range(2)
    ]


def test_a_reopened_store_holds_every_finished_task_once(tmp_path):
    store = RecordStore(tmp_path, SETTINGS)
    store.add("a", recs("a"))
    store.add("b", recs("b"))
    with pytest.raises(ValueError, match="already"):
        store.add("a", recs("a"))
    again = RecordStore(tmp_path, SETTINGS)
    assert list(again.done) == ["a", "b"] and again.records() == recs("a") + recs("b")


def test_a_line_cut_by_a_crash_is_dropped_and_its_task_runs_again(tmp_path):
    store = RecordStore(tmp_path, SETTINGS)
    store.add("a", recs("a"))
    whole = store.path.read_bytes()
    line = json.dumps({"task": "b", "samples": [r.to_json() for r in recs("b")]})
    store.path.write_bytes(whole + line[: len(line) // 2].encode())
    again = RecordStore(tmp_path, SETTINGS)
    assert list(again.done) == ["a"] and again.dropped_partial == 1
    assert store.path.read_bytes() == whole  # cut back, so the next append starts on a fresh line
    again.add("b", recs("b"))
    assert list(RecordStore(tmp_path, SETTINGS).done) == ["a", "b"]


def test_a_line_without_its_newline_is_not_trusted(tmp_path):
    store = RecordStore(tmp_path, SETTINGS)
    store.add("a", recs("a"))
    store.path.write_bytes(store.path.read_bytes().rstrip(b"\n"))
    assert RecordStore(tmp_path, SETTINGS).done == {}


def test_other_settings_are_refused_naming_what_changed(tmp_path):
    RecordStore(tmp_path, SETTINGS).add("a", recs("a"))
    with pytest.raises(SettingsMismatch, match="eval"):
        RecordStore(tmp_path, {**SETTINGS, "eval": {"samples_per_task": 4}})
