"""Red team, issue 26 (found while attacking the spare evaluation groups, but older than them): after the
evaluation the trusted caller reads the candidate's captured stdout/stderr from the candidate's own folder.
The candidate can swap `stdout.txt` for a symlink to a host file its sandbox hides (the caller, unsandboxed,
copied that file into the verdict's details, which reach the trainer and the policy's next turn) or for a FIFO
(the caller's open() waited for a writer for good, and a replica lost that worker). Both were observed on main.

Code in the candidate's process is assumed (the gate is one layer): `_verify_ungated`, as in test_redteam.py."""

from __future__ import annotations

import glob
import os
import stat
import threading
from pathlib import Path

import pytest

from drkernel.verify import Verifier, VerifyOptions

pytestmark = pytest.mark.integration

CANDIDATES = Path(__file__).parent.parent / "candidates"
REF = (CANDIDATES / "ref_add_relu.py").read_text()
HONEST = (CANDIDATES / "honest_add_relu.py").read_text()
OPTS = VerifyOptions(device="cpu", num_correct_trials=2, num_perf_trials=2, num_warmup=1, timeout_s=300)

LINKER = """
import os
os.remove("stdout.txt")
os.symlink({target!r}, "stdout.txt")
"""

FIFO = """
import os
os.remove("stdout.txt")
os.mkfifo("stdout.txt")
"""


@pytest.mark.parametrize("spares", [0, 1])
def test_captured_output_does_not_follow_a_candidates_symlink(tmp_path, spares):
    secret = tmp_path / "host_only.txt"
    secret.write_text("HOST-FILE-THE-CANDIDATE-CANNOT-READ\n")
    secret.chmod(0o600)
    with Verifier(device="cpu", max_concurrency=1, spares=spares) as v:
        assert v.warm_spares(OPTS) == spares
        r = v._verify_ungated(REF, LINKER.format(target=str(secret)) + HONEST, OPTS)
    leaked = [k for k, text in r.details.items() if isinstance(text, str) and "HOST-FILE-THE-CANDIDATE" in text]
    assert not leaked, f"the caller copied a host file into the verdict via a candidate's symlink: {leaked}"
    assert "replaced" in r.details.get("candidate_stdout", ""), r.details.get("candidate_stdout")


def test_a_fifo_for_captured_output_does_not_hang_the_caller():
    with Verifier(device="cpu", max_concurrency=1, spares=1) as v:
        assert v.warm_spares(OPTS) == 1
        done: dict = {}
        t = threading.Thread(target=lambda: done.setdefault("r", v._verify_ungated(REF, FIFO + HONEST, OPTS)))
        t.daemon = True
        t.start()
        t.join(300)
        returned = "r" in done
        if not returned:  # unblock the caller's open() so the Verifier can close (a writer appears, then EOF)
            for path in glob.glob("/tmp/drkernel-verify-*/candidate/stdout.txt"):
                if stat.S_ISFIFO(os.lstat(path).st_mode):
                    try:
                        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                    except OSError:
                        pass
            t.join(30)
    assert returned, "verify() still blocked 300 s after the candidate swapped its stdout.txt for a FIFO"
    assert "replaced" in done["r"].details.get("candidate_stdout", "")
