"""Both runners are timed the same way, so a reference against itself lands at a speedup of 1.

On the H200 an early rebuild gave self-speedups of 0.62-0.92: the candidate's round trips carried work the
reference's did not. The figures themselves move with the host's load, so they live in a benchmark
(benchmarks/verifier_symmetry_cpu.py, BENCHMARKS.md); these tests check what makes them even and can fail
without a timing: both runners' empty round trips are measured and subtracted, and every evaluation of a
reference against itself (fork-server children, Triton interpreter) gives a finite, positive speedup.
"""

import math
import os

import pytest

from drkernel.verify import Verifier, VerifyOptions
from drkernel.verify.process.channel import open_ipc_refcounters as _open_ipc_refcounters
from drkernel.verify.process.group import remove_ipc_files

pytestmark = pytest.mark.integration

FAST_REFERENCE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0 + 1.0

def get_inputs():
    return [torch.randn(8, 512)]

def get_init_inputs():
    return []
"""

SELF = VerifyOptions(
    device="cpu", require_triton=False, measure_coverage=False, num_perf_trials=15, num_warmup=1, timeout_s=120
)
EVALUATIONS = 3


EVERY_ROUND = SELF.model_copy(
    update={"timing_precision": 0.0, "timing_budget_s": 0.0}
)  # the last evaluation times all 15 rounds


@pytest.fixture(scope="module")
def self_results():
    with Verifier(device="cpu", max_concurrency=1) as v:
        options = [SELF] * (EVALUATIONS - 1) + [EVERY_ROUND]
        return [v.verify(FAST_REFERENCE, FAST_REFERENCE, o) for o in options]


def test_reference_against_itself_is_judged_like_any_candidate(self_results):
    assert all(r.status == "ok" and r.correct and r.hack is None for r in self_results), [r.error for r in self_results]
    assert all(math.isfinite(r.speedup) and r.speedup > 0 for r in self_results), [r.speedup for r in self_results]


def test_empty_round_trips_of_both_runners_are_measured(self_results):
    """The judge subtracts the reference runner's empty round trip from both sides' timed calls; it measures the
    candidate runner's through the same path, and reports both."""
    for r in self_results:
        assert r.details["empty_round_trip_ms"] > 0 and r.details["empty_round_trip_candidate_ms"] > 0, r.details


def test_ipc_refcounters_opened_only_for_this_process(tmp_path):
    """Only the judge's own reference-counter files are opened to the runner's uid, each once."""
    mine = f"/dev/shm/torch_{os.getpid()}_symmetry_test"
    other = "/dev/shm/torch_4194999_symmetry_test"  # above pid_max: no live process owns it
    for path in (mine, other):
        with open(path, "w"):
            pass
        os.chmod(path, 0o600)
    try:
        opened: set[str] = set()
        _open_ipc_refcounters(opened)
        assert os.stat(mine).st_mode & 0o777 == 0o666
        assert os.stat(other).st_mode & 0o777 == 0o600
        assert mine in opened and other not in opened
    finally:
        for path in (mine, other):
            if os.path.exists(path):
                os.unlink(path)


def test_ipc_files_of_a_killed_child_are_removed():
    """A judge killed at the end of an evaluation cannot unlink its IPC counter files: the engine does."""
    dead = "/dev/shm/torch_4194998_1_1"
    other = "/dev/shm/torch_4194997_1_1"
    for path in (dead, other):
        with open(path, "w"):
            pass
    try:
        remove_ipc_files(4194998)
        assert not os.path.exists(dead) and os.path.exists(other)
    finally:
        for path in (dead, other):
            if os.path.exists(path):
                os.unlink(path)


def test_batched_comparison_never_passes_what_compare_fails():
    """A round's outputs are compared in one batch; a call passes there only when tensors.compare passes it,
    with the same statistics, and every doubtful call is left to tensors.compare."""
    import torch

    from drkernel.verify.judging import tensors
    from drkernel.verify.judging.outputs import batch_passes as _batch_passes

    torch.manual_seed(0)
    ref = [[torch.randn(4, 33)] for _ in range(6)]
    cand = [
        [ref[0][0].clone()],
        [ref[1][0] + 1e-4],
        [ref[2][0] * 1e-6],
        [ref[3][0].clone()],
        [ref[4][0] + 0.5],
        [ref[5][0].clone()],
    ]
    cand[3][0][0, 0] = float("nan")
    cand[5][0][1, 2] = float("inf")
    quick = _batch_passes(ref, cand, 1e-2, 1e-2, strict=True)
    assert quick is not None and [q is not None for q in quick] == [True, True, False, False, False, False]
    for j, q in enumerate(quick):
        ok, _, stats = tensors.compare(ref[j], cand[j], 1e-2, 1e-2, "strict")
        assert ok == (q is not None)
        if q is not None:
            assert q["max_abs_diff"] == pytest.approx(stats["max_abs_diff"])
            assert q["rel_l2"] == pytest.approx(stats["rel_l2"], abs=1e-12)
    # softmax-sized values times 1e-6 are within atol elementwise: only the strict (scale) mode fails them
    small = [[torch.rand(4, 33) * 1e-4]]
    scaled = [[small[0][0] * 1e-6]]
    assert _batch_passes(small, scaled, 1e-2, 1e-2, strict=False)[0] is not None
    assert _batch_passes(small, scaled, 1e-2, 1e-2, strict=True)[0] is None
    # integer outputs, scalars or mixed shapes: the whole round goes to tensors.compare
    assert _batch_passes([[torch.ones(3, dtype=torch.int64)]], [[torch.ones(3, dtype=torch.int64)]], 0, 0, True) is None
    assert _batch_passes([[1.0]], [[1.0]], 0, 0, True) is None


def test_timing_ends_between_the_minimum_and_the_most_rounds(self_results):
    """Every timed round is recorded; the precision rule may end timing from min_perf_trials on, and with a
    precision of 0 every round asked for is timed."""
    for r in self_results:
        n = r.details["perf_trials"]
        assert len(r.details["rounds_ms"]["candidate"]) == len(r.details["rounds_ms"]["reference"]) == n
        assert SELF.min_perf_trials <= n <= SELF.num_perf_trials, n
        lo, hi = r.details["ratio_interval"]
        assert 0 <= lo <= hi, r.details["ratio_interval"]  # 0: a round clamped at the empty round trip (load)
    assert self_results[-1].details["perf_trials"] == SELF.num_perf_trials
