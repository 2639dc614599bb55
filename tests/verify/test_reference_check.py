"""The runtime load check execs references in a sandboxed child process, without calling get_inputs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from drkernel.verify.reference_check import CheckerFailed, check_loadable

GOOD = """import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x
def get_inputs():
    raise SystemExit("get_inputs must never be called by the load check")
def get_init_inputs():
    return []
"""


def test_verdicts_per_source():
    verdicts = check_loadable(
        {
            "good.py": GOOD,
            "raises.py": "import torch\nraise RuntimeError('module body failed')\n",
            "not_module.py": GOOD.replace("class Model(nn.Module)", "class Model"),
            "no_inputs.py": GOOD.replace("def get_inputs", "def other"),
            "exits.py": "import sys\nprint('noise')\nsys.exit(3)\n",
            "offline.py": GOOD + "import os\nassert os.environ['HF_HUB_OFFLINE'] == '1'\n",
            "multiline.py": "raise OSError('first line\\n  second line')\n",
        }
    ).verdicts
    assert verdicts["good.py"] is None
    assert verdicts["raises.py"] == "RuntimeError: module body failed"
    assert verdicts["not_module.py"] == "Model is not an nn.Module subclass"
    assert verdicts["no_inputs.py"] == "get_inputs is not callable"
    assert verdicts["exits.py"] == "SystemExit: 3"
    assert verdicts["offline.py"] is None  # the child never reaches for the network
    assert verdicts["multiline.py"] == "OSError: first line second line"  # one line per report


def test_a_source_that_kills_the_checker_is_named():
    with pytest.raises(CheckerFailed, match=r"1 of 3 checked, stopped at killer.py"):
        check_loadable({"a.py": GOOD, "killer.py": "import os\nos._exit(9)\n", "b.py": GOOD})


def test_empty_input_needs_no_process():
    assert check_loadable({}).verdicts == {}


def test_sources_run_in_the_verifiers_sandbox(tmp_path):
    """A reference that writes to disk or reaches the network on import can do neither."""
    target = tmp_path / "written_on_import.txt"
    writes = f"open({str(target)!r}, 'w').write('escaped')\n" + GOOD
    network = "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)\n" + GOOD
    check = check_loadable({"writes.py": writes, "network.py": network, "good.py": GOOD})
    assert check.sandbox["namespaces"] == "active" and check.sandbox["environment"] == "scrubbed"
    assert check.verdicts["writes.py"].startswith(("OSError: [Errno 30] Read-only", "PermissionError")), check.verdicts
    assert not target.exists()
    assert check.verdicts["network.py"].startswith("OSError: [Errno 101] Network is unreachable")
    assert check.verdicts["good.py"] is None


def test_a_process_a_source_leaves_behind_is_killed(tmp_path):
    """The child's whole process group dies with the check, so a daemon started on import cannot linger."""
    marker = f"drkernel-refcheck-sleeper-{id(tmp_path)}"
    sleeper = [sys.executable, "-c", "import time; time.sleep(300)", marker]
    spawns = f"import subprocess\nsubprocess.Popen({sleeper!r})\n" + GOOD
    assert check_loadable({"spawns.py": spawns}).verdicts["spawns.py"] is None
    survivors = [p for p in Path("/proc").iterdir() if p.name.isdigit() and marker in _cmdline(p)]
    assert survivors == []


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
