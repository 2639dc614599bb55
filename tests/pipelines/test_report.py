"""report.html (pipelines/report.py) from a run folder's files: one self-contained page whose data holds every
trajectory and sample the run recorded, where kernel text is data, never markup or script."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pipelines.cli import main as cli_main
from pipelines.report import build_report, write_report

HOSTILE = '</script><script>window.pwned=1</script><img src=x onerror="window.pwned=2"><!-- <b>bold</b> &amp;'


class Page(HTMLParser):
    """Every element with its attributes, and the text of each <script>."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    return page


def page_data(text: str) -> dict:
    page = parse(text)
    (data,) = [
        s
        for (tag, attrs), s in zip([t for t in page.tags if t[0] == "script"], page.scripts)
        if attrs.get("id") == "report-data"
    ]
    return json.loads(data)


def _run_folder(root: Path, kernel: str) -> Path:
    run = root / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "rollout/reward_mean": 0.1 * s, "outcomes/trained": 2.0}) + "\n" for s in (1, 2))
    )
    turns = [
        {"turn": 0, "category": "wrong", "reward": 0.0, "masked": False, "speedup": None, "decision": "trained"},
        {"turn": 1, "category": "correct", "reward": 1.2, "masked": False, "speedup": 1.5, "decision": "trained"},
    ]
    outcomes = [
        {"step": s, "group_id": f"g{s}", "sample_index": i, "task_uid": "add", "turns": turns, "outcome": "trained"}
        for s in (1, 2)
        for i in (0, 1)
    ] + [{"step": 2, "group_id": "g9", "sample_index": 0, "task_uid": "relu", "turns": [], "outcome": "dropped_stale",
          "detail": "stale: sampled at version 0, 2 behind"}]  # fmt: skip
    (run / "outcomes.jsonl").write_text("".join(json.dumps(o) + "\n" for o in outcomes) + '{"cut by a kill')
    sample_turns = [
        {"turn": 0, "category": "wrong", "reward": 0.0, "kernel": "import triton\n", "feedback": "wrong <values>",
         "response": "```python\nimport triton\n```", "verdict": {"status": "ok", "correct": False}},
        {"turn": 1, "category": "correct", "reward": 1.2, "kernel": kernel, "feedback": None, "response": kernel,
         "verdict": {"status": "ok", "correct": True, "speedup": 1.5}},
    ]  # fmt: skip
    samples = [
        {"step": s, "group_id": f"g{s}", "sample_index": 0, "task_uid": "add", "prompt": "Write ModelNew <html>",
         "turns": sample_turns, "outcome": "trained", "detail": ""}
        for s in (1, 2)
    ]  # fmt: skip
    (run / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    (run / "config.json").write_text(json.dumps({"trainer": {"total_steps": 2}}))
    return run


def test_the_page_holds_every_record_and_kernel_text_cannot_break_out(tmp_path):
    run = _run_folder(tmp_path, HOSTILE)
    text = write_report(run, "stopped: JobStopped: signal SIGTERM").read_text()
    page = parse(text)
    assert [t for t, _ in page.tags].count("script") == 2  # the data block and the page's code, nothing injected
    assert "<script>window" not in text and "<img src=x" not in text and "<!-- <b>" not in text
    assert not [a for t, a in page.tags if t == "img" and not str(a.get("src", "")).startswith("data:")]
    data = page_data(text)
    assert data["status"].startswith("stopped") and len(data["metrics"]) == 2
    assert len(data["samples"]) == 2 and len(data["outcomes"]) == 5  # the cut last line is skipped, not fatal
    assert data["samples"][1]["turns"][1]["kernel"] == HOSTILE  # shown as text, exactly
    assert {o["outcome"] for o in data["outcomes"]} == {"trained", "dropped_stale"}


def test_the_page_loads_nothing_from_the_network(tmp_path):
    text = build_report(_run_folder(tmp_path, "x = 1"))
    page = parse(text)
    for tag, attrs in page.tags:
        for name in ("src", "href", "action", "data"):
            value = attrs.get(name)
            assert value is None or value.startswith(("data:", "#")), (tag, name, value)
        assert not (tag == "link" or (tag == "script" and "src" in attrs)), tag
    csp = [a["content"] for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in csp[0]
    code = "".join(page.scripts)
    assert not re.search(r"\b(fetch|XMLHttpRequest|WebSocket|importScripts|EventSource)\b|https?://", code)
    assert "innerHTML" not in code and "insertAdjacentHTML" not in code and "document.write" not in code


def test_drkernel_report_writes_the_page_and_refuses_a_folder_without_a_run(tmp_path, capsys):
    run = _run_folder(tmp_path, "x = 1")
    assert cli_main(["report", str(run)]) == 0
    assert capsys.readouterr().out.strip() == str(run / "report.html")
    assert page_data((run / "report.html").read_text())["config"] == {"trainer": {"total_steps": 2}}
    assert cli_main(["report", str(tmp_path / "nothing")]) == 2
    assert "holds neither metrics.jsonl" in capsys.readouterr().err


@pytest.mark.parametrize("status", [None, "failed: ClusterTooSmall: this job reserves 2.75 CPUs"])
def test_status_is_said_whatever_the_run_left(tmp_path, status):
    run = tmp_path / "early"
    run.mkdir()
    (run / "metrics.jsonl").write_text("")
    data = page_data(build_report(run, status))
    assert data["status"] == (status or "no summary yet (running, or ended early)")
    assert data["outcomes"] == [] and data["samples"] == [] and data["metrics"] == []
