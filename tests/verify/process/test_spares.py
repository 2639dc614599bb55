"""Issue 26: evaluation children started ahead of need (spares) keep the trust boundary. Every test runs
evaluations back to back on one Verifier whose next evaluation is known to get a spare that already
existed while the previous candidate ran: real fork-server children, real sandbox, Triton interpreter."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from drkernel.rl.rewards import score
from drkernel.verify import Verifier, VerifyOptions

pytestmark = pytest.mark.integration

CANDIDATES = Path(__file__).parents[1] / "candidates"
REF = (CANDIDATES / "ref_add_relu.py").read_text()
HONEST = (CANDIDATES / "honest_add_relu.py").read_text()
# timeout_s: a budget, not a bound under test (a loaded 2-core box)
OPTS = VerifyOptions(device="cpu", num_correct_trials=2, num_perf_trials=2, num_warmup=1, timeout_s=300)

# Leaves a mark everywhere a later evaluation could look: the interpreter (builtins, torch, environment), its
# own folder, and the folders of every other evaluation group on the host (the spare waiting for the next one).
POLLUTER = """
import builtins, glob, os
import torch
builtins._drk_left_behind = "polluted"
torch._drk_left_behind = "polluted"
os.environ["DRK_LEFT_BEHIND"] = "polluted"
open("left_behind.txt", "w").write("polluted")
for d in glob.glob("/tmp/drkernel-verify-*/*/"):
    for name in ("planted.txt", "reference.py"):
        try:
            open(os.path.join(d, name), "w").write("planted")
        except OSError:
            pass
"""

# Raises at import (a verdict with the message) when it finds any mark a previous candidate could have left.
INSPECTOR = """
import builtins, os
import torch
_seen = [w for w, hit in (
    ("builtins", hasattr(builtins, "_drk_left_behind")),
    ("torch", hasattr(torch, "_drk_left_behind")),
    ("environment", "DRK_LEFT_BEHIND" in os.environ),
    ("folder", sorted(set(os.listdir(".")) - {"candidate.py", "reference.py", "stdout.txt", "stderr.txt",
                                               "__pycache__"})),
) if hit]
if _seen:
    raise RuntimeError(f"left behind: {_seen}")
"""

# Prints the inputs it is given (the judge's secret inputs of this evaluation) into its captured stdout.
SNOOPER = """
_real_forward = ModelNew.forward
def _forward(self, x, y):
    print("inputs", float(x.double().sum()), float(y.double().sum()), flush=True)
    return _real_forward(self, x, y)
ModelNew.forward = _forward
"""


@pytest.fixture()
def verifier():
    with Verifier(device="cpu", max_concurrency=1, spares=1) as v:
        yield v


def run_on_spare(verifier: Verifier, candidate: str):
    """The next evaluation, on a spare that existed while the previous one ran (or, if that spare's folders were
    tampered with, on a fresh group that says why the spare was refused)."""
    assert verifier.warm_spares(OPTS) == 1, "the spare was not ready in time"
    r = verifier._verify_ungated(REF, candidate, OPTS)
    assert r.details["children"] == "spare" or "spare_refused" in r.details, r.details
    return r


def test_a_candidate_leaves_nothing_for_the_next_one(verifier):
    polluted = run_on_spare(verifier, POLLUTER + HONEST)
    assert polluted.status == "ok" and polluted.correct, polluted.error
    r = run_on_spare(verifier, INSPECTOR + HONEST)
    assert r.status == "ok" and r.error is None and r.correct, r.error
    assert score(r) > 0


def test_a_spare_with_planted_files_is_refused(verifier):
    assert verifier.warm_spares(OPTS) == 1
    (spare,) = [g for pool in verifier._pools.values() for g in pool]
    os.symlink("/etc/passwd", os.path.join(spare.dirs["reference"], "reference.py"))
    r = verifier._verify_ungated(REF, INSPECTOR + HONEST, OPTS)
    assert r.correct and r.details["children"] == "started for this evaluation", r.details
    assert "reference folder holds ['reference.py']" in r.details["spare_refused"]


def test_no_two_evaluations_share_secret_inputs(verifier):
    seen = []
    for _ in range(3):
        r = run_on_spare(verifier, HONEST + SNOOPER)
        assert r.correct, r.error
        seen.append(frozenset(re.findall(r"inputs (\S+) (\S+)", r.details.get("candidate_stdout", ""))))
    assert all(seen), "the snooper printed nothing"
    assert not (seen[0] & seen[1]) and not (seen[1] & seen[2]) and not (seen[0] & seen[2]), seen


def test_a_spare_is_never_handed_out_twice_and_close_ends_the_spares():
    with Verifier(device="cpu", max_concurrency=1, spares=2) as v:
        assert v.warm_spares(OPTS) == 2
        groups = [g for pool in v._pools.values() for g in pool]
        r = v._verify_ungated(REF, HONEST, OPTS)
        assert r.correct and r.details["children"] == "spare"
        pooled = [g for pool in v._pools.values() for g in pool]
        used = [g for g in groups if g not in pooled]
        assert len(used) == 1
        for p in used[0].procs.values():
            p.join(30)
        assert all(p.exitcode is not None for p in used[0].procs.values()), "the used group outlived its evaluation"
    for g in groups:
        for p in g.procs.values():
            p.join(30)
    assert all(p.exitcode is not None for g in groups for p in g.procs.values()), "close left a spare running"


def test_cpu_default_is_no_spares_and_children_start_per_evaluation():
    with Verifier(device="cpu", max_concurrency=1) as v:
        assert v.spares == 0  # the 2-core CPU box measured slower with spares (BENCHMARKS.md, issue 26)
        r = v._verify_ungated(REF, HONEST, OPTS)
        assert r.correct and r.details["children"] == "started for this evaluation"
        assert not v._pools


def test_close_leaves_no_evaluation_folder_behind(tmp_path, monkeypatch):
    """Finished evaluations' groups are removed in the background; close waits for that, spares included."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # where this Verifier's groups make their folders
    with Verifier(device="cpu", max_concurrency=1, spares=1) as v:
        assert v.warm_spares(OPTS) == 1
        r = v._verify_ungated(REF, HONEST, OPTS)
        assert r.correct, r.error
    assert not list(tmp_path.glob("drkernel-verify-*"))
