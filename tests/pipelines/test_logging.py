"""Logs and progress go to stderr (text, or JSON lines on request); stdout keeps only the command's result."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import select
import struct
import sys
import termios

import pytest

from drkernel.log import FORMAT_ENV, Progress, get_logger, progress, setup_logging
from pipelines.cli import main

GOOD = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x + 1

def get_inputs():
    return [torch.randn(4)]

def get_init_inputs():
    return []
"""


@pytest.fixture(autouse=True)
def _restore_logging(monkeypatch):
    monkeypatch.delenv(FORMAT_ENV, raising=False)
    yield
    setup_logging(json_lines=False)


def test_json_lines_carry_level_logger_and_fields(capsys):
    setup_logging(json_lines=True)
    get_logger("unit").warning("kept %d of %d", 3, 4, extra={"fields": {"step": 7}})
    captured = capsys.readouterr()
    assert captured.out == ""
    entry = json.loads(captured.err.strip())
    assert entry["level"] == "warning" and entry["logger"] == "drkernel.unit"
    assert entry["msg"] == "kept 3 of 4" and entry["step"] == 7


def test_environment_picks_json_when_no_flag_is_given(capsys, monkeypatch):
    monkeypatch.setenv(FORMAT_ENV, "json")
    setup_logging()
    get_logger("unit").info("hello")
    assert json.loads(capsys.readouterr().err)["msg"] == "hello"


def test_progress_without_a_terminal_is_periodic_lines_on_stderr(capsys):
    setup_logging(json_lines=True)
    assert list(progress(range(5), desc="items", every_s=0.0)) == [0, 1, 2, 3, 4]
    captured = capsys.readouterr()
    lines = [json.loads(line)["msg"] for line in captured.err.splitlines()]
    assert captured.out == ""
    assert lines[0].startswith("items 1/5") and lines[-1].startswith("items 5/5") and len(lines) == 6
    with Progress(None, "quiet", every_s=3600.0) as bar:
        bar.update(2)
    # nothing between the 1-hour ticks, one closing line, and closing twice adds none
    bar.close()
    assert [json.loads(line)["msg"].split(" (")[0] for line in capsys.readouterr().err.splitlines()] == ["quiet 2/?"]


def test_progress_on_a_terminal_draws_a_bar_and_keeps_log_lines_readable(monkeypatch):
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a 100-column terminal
    tty = os.fdopen(slave, "w", buffering=1)
    monkeypatch.setattr(sys, "stderr", tty)
    try:
        setup_logging(json_lines=False)
        for i in progress(range(3), desc="steps"):
            if i == 1:
                get_logger("unit").info("midway")
        tty.flush()
        chunks = []
        while select.select([master], [], [], 0.2)[0]:
            chunks.append(os.read(master, 65536))
        text = b"".join(chunks).decode(errors="replace")
    finally:
        tty.close()
        os.close(master)
    assert "steps: 100%" in text and "3/3" in text
    assert "drkernel.unit: midway" in text
    assert logging.getLogger("drkernel").handlers  # the bar's log redirection was undone


def test_prepare_data_logs_on_stderr_and_writes_its_result_on_stdout(tmp_path, capsys):
    src = tmp_path / "refs"
    src.mkdir()
    (src / "1_Good.py").write_text(GOOD)
    (src / "2_Bad.py").write_text("x = 1\n")
    out = tmp_path / "pool.parquet"
    argv = ["prepare-data", "--log-json", "--src", str(src), "--out", str(out), "--skip-invalid", "--no-load-check"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.out.strip().startswith("wrote 1 rows to") and len(captured.out.strip().splitlines()) == 1
    entries = [json.loads(line) for line in captured.err.splitlines()]  # every stderr line is a JSON object
    assert any(e["level"] == "warning" and "2_Bad.py" in e["msg"] for e in entries)
    assert any(e["logger"] == "drkernel.progress" and e["msg"].startswith("references parsed 2/2") for e in entries)


def test_the_sandboxed_load_check_reports_its_progress(tmp_path, capsys):
    src = tmp_path / "refs"
    src.mkdir()
    for i in range(3):
        (src / f"{i + 1}_Good{i}.py").write_text(GOOD)
    argv = ["prepare-data", "--log-json", "--src", str(src), "--out", str(tmp_path / "pool.parquet")]
    assert main(argv) == 0
    entries = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    checked = [e["msg"] for e in entries if e["msg"].startswith("references load-checked")]
    assert checked and checked[-1].startswith("references load-checked 3/3"), entries


def test_library_notices_that_say_nothing_are_dropped_where_the_ray_layer_loads():
    """verl's "X engine is not available" warnings and its "no accelerator" fallback lines filled every trainer
    actor's log; importing the Ray layer (`actors`, `serve_apps`) drops them, DRKERNEL_LOG_LEVEL=DEBUG keeps them."""
    import subprocess
    from pathlib import Path

    import torch

    repo = Path(__file__).resolve().parents[2]
    script = (
        "import actors, serve_apps, verl.workers.engine\n"
        "from verl.plugin.platform.platform_manager import get_platform\n"
        "get_platform()\n"
    )

    def stderr(**env: str) -> str:
        base = {k: v for k, v in os.environ.items() if k != "DRKERNEL_LOG_LEVEL"} | {"PYTHONPATH": str(repo)}
        run = subprocess.run(
            [sys.executable, "-c", script], env=base | env, capture_output=True, text=True, timeout=300
        )
        assert run.returncode == 0, run.stderr[-2000:]
        return run.stderr

    loud = stderr(DRKERNEL_LOG_LEVEL="DEBUG")
    assert "engine is not available" in loud  # the notices exist here (verl's optional engines are not installed)
    if not torch.cuda.is_available():
        assert "No supported accelerator detected" in loud and "registered but not available" in loud
    quiet = stderr()
    for notice in ("engine is not available", "No supported accelerator", "registered but not available"):
        assert notice not in quiet, quiet[-2000:]
