"""Issue 8: the trust boundary holds layer by layer. Each attack is an adversarial candidate of our own,
run through `_verify_ungated` (the static gate would reject most of them before anything runs; here the
runtime layers must hold on their own): real fork-server children, real Triton interpreter, tiny shapes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from drkernel.rl.rewards import score
from drkernel.verify import Verifier, VerifyOptions

pytestmark = pytest.mark.integration

CANDIDATES = Path(__file__).parent / "candidates"
REF = (CANDIDATES / "ref_add_relu.py").read_text()
HONEST = (CANDIDATES / "honest_add_relu.py").read_text()
# timeout_s: a budget, not a bound under test; the burn-in candidate took over 60 s on a box at load 50-70
OPTS = VerifyOptions(device="cpu", num_correct_trials=2, num_perf_trials=3, num_warmup=1, timeout_s=300)
MARKER = "/tmp/drkernel_issue8_pwned"

KERNEL = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x + y, 0.0), mask=mask)


def launch(x, y):
    out = torch.empty_like(x)
    add_relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
"""


def model_new(body: str, prelude: str = "", init: str = "pass") -> str:
    return (
        KERNEL
        + prelude
        + f"""

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        {init}

    def forward(self, x, y):
        {body}
"""
    )


@pytest.fixture(scope="module")
def verifier():
    with Verifier(device="cpu", max_concurrency=2) as v:
        yield v


def ungated(verifier, candidate: str, reference: str = REF, **over) -> object:
    r = verifier._verify_ungated(reference, candidate, OPTS.model_copy(update=over))
    assert r.status == "ok", f"a candidate's misbehaviour is a verdict, never infra: {r.error}"
    return r


def test_honest_kernel_still_earns_a_reward(verifier):
    r = verifier.verify(REF, HONEST, OPTS)
    assert r.correct and r.hack is None and score(r) > 0.5 and r.details["isolation"]["preloaded"] == "yes"
    assert r.details["calls_per_round"] >= 1 and r.details["empty_round_trip_ms"] > 0


# -- seen #1: code execution through the harness channel ----------------------------------------------------
FIND_CONN = f"""
import gc
import multiprocessing.connection


def _channel():
    # the open one: a spare's closed start pipe (issue 26) is also a Connection
    return [o for o in gc.get_objects() if isinstance(o, multiprocessing.connection.Connection) and not o.closed][0]


class Boom:
    def __reduce__(self):
        return (exec, ("open({MARKER!r}, 'w').write('ran')",))
"""


@pytest.mark.parametrize(
    "send",
    [
        "_channel().send(Boom())",  # a pickle frame where the judge expects JSON
        '_channel().send_bytes(b\'{"type": "fault", "kind": "infra", "message": "m", "detail": "", \''
        'b\'"phase": "run"}\')',  # a fake infra fault, to be masked instead of scored 0
        '_channel().send_bytes(b\'{"type": "reference_failed", "message": "not me"}\')',
    ],
)
def test_messages_forged_on_the_harness_channel_are_never_believed(verifier, send):
    if os.path.exists(MARKER):
        os.remove(MARKER)
    r = ungated(verifier, model_new(f"{send}\n        return launch(x, y)", prelude=FIND_CONN))
    assert not os.path.exists(MARKER), "a candidate's bytes were unpickled outside its process"
    assert score(r) == 0 and not r.correct
    assert r.error.kind == "protocol" and r.hack == "harness_tampering", r.error


# -- seen #2: the candidate's process no longer measures anything ------------------------------------------
def test_patching_timers_in_the_candidate_changes_nothing(verifier):
    """Patched once correctness has passed (2 trials), so timing runs with the timers replaced."""
    prelude = "\nimport time\n_sleep = time.sleep\n"
    body = (
        "self.calls += 1\n"
        "        if self.calls > 2:\n"
        "            time.perf_counter = lambda: 0.0\n            time.perf_counter_ns = lambda: 0\n"
        "        _sleep(0.02)\n        return launch(x, y)"
    )
    r = ungated(verifier, model_new(body, prelude=prelude, init="self.calls = 0"))
    assert r.correct and r.runtime_ms >= 20.0, r.runtime_ms  # the judge's clock saw the sleep
    assert r.hack == "harness_tampering" and score(r) == 0


# -- seen #3: slowing only the reference (it now runs in a process the candidate never touches) -------------
SLOW_REFERENCE = """
import sys
import time
import torch
from torch.overrides import TorchFunctionMode


def _slow_pre_hook(module, args):
    if type(module).__name__ != "ModelNew":
        time.sleep(0.05)


class _Slow(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.relu:
            time.sleep(0.05)
        return func(*args, **(kwargs or {}))


torch.nn.modules.module.register_module_forward_pre_hook(_slow_pre_hook)
_Slow().__enter__()
sys.setprofile(lambda frame, event, arg: None)
torch.Tensor.__drkernel_marker__ = 1
"""


def test_hooks_modes_and_profilers_cannot_slow_the_reference(verifier):
    r = ungated(verifier, model_new("return launch(x, y)", prelude=SLOW_REFERENCE))
    assert r.correct and r.ref_runtime_ms is not None and r.ref_runtime_ms < 20.0, r.ref_runtime_ms
    assert r.speedup < 1.0  # the interpreter kernel is slower than torch on CPU; no fake 50 ms reference


def test_wrapping_the_reference_forward_cannot_reach_the_reference(verifier):
    prelude = """
import sys
import time
_ref = sys.modules.get("reference")
if _ref is not None:
    _orig = _ref.Model.forward
    def _slow(self, *a):
        time.sleep(0.05)
        return _orig(self, *a)
    _ref.Model.forward = _slow
"""
    r = ungated(verifier, model_new("return launch(x, y)", prelude=prelude))
    assert r.correct and r.ref_runtime_ms < 20.0


# -- seen #4: seeds --------------------------------------------------------------------------------------------
def test_initial_seed_does_not_name_the_inputs(verifier):
    """Old harness: torch was seeded with the input seed right before get_inputs in this process."""
    body = (
        "torch.manual_seed(torch.initial_seed())\n"
        "        a, b = torch.randn(4096), torch.randn(4096)\n"
        "        return launch(a, b)"
    )
    r = ungated(verifier, model_new(body))
    assert not r.correct and r.error.kind == "output_mismatch" and score(r) == 0


# -- seen #5: every call is checked ----------------------------------------------------------------------------
def test_garbage_on_some_timed_calls_is_caught(verifier):
    init = "self.calls = 0"
    body = (
        "self.calls += 1\n"
        "        out = launch(x, y)\n"
        "        return out if self.calls <= 2 or self.calls % 5 == 0 else out * 0"
    )
    r = ungated(verifier, model_new(body, init=init))
    assert r.hack == "result_caching" and score(r) == 0, (r.hack, r.error)
    assert any(c.name == "every_call_checked" and not c.passed for c in r.checks)


# -- seen #7: an output far below atol ------------------------------------------------------------------------
WIDE_SOFTMAX_REF = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.rand(2, 16384)]


def get_init_inputs():
    return []
"""

TINY_SOFTMAX = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 1e-6, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 8192),)](x, out, x.numel(), BLOCK=8192)
        return out
"""


def test_tiny_softmax_output_fails_strict_and_passes_kernelbench(verifier):
    strict = verifier.verify(
        WIDE_SOFTMAX_REF,
        TINY_SOFTMAX,
        OPTS.model_copy(update={"measure_performance": False, "measure_coverage": False}),
    )
    assert strict.status == "ok" and not strict.correct and strict.error.kind == "output_mismatch"
    assert "relative L2" in strict.error.message and score(strict) == 0
    assert any(c.name == "correctness_scale" and not c.passed for c in strict.checks)
    assert any(c.name == "correctness_elementwise" and c.passed for c in strict.checks)
    kb = verifier.verify(
        WIDE_SOFTMAX_REF,
        TINY_SOFTMAX,
        OPTS.model_copy(update={"correctness": "kernelbench", "measure_performance": False, "measure_coverage": False}),
    )
    assert kb.correct, "the KernelBench-compatible verdict stays available for comparisons"


# -- seen #8: whatever the candidate returns is a candidate verdict -------------------------------------------
@pytest.mark.parametrize(
    "ret",
    [
        "torch.empty(4096, device='meta')",
        "{'out': out}",
        "object()",
        "[out] * 100",
        "out.to(torch.complex32)",
        "out * float('nan')",
        "out.as_subclass(type('Sub', (torch.Tensor,), {}))",
    ],
)
def test_bad_returns_are_candidate_verdicts(verifier, ret):
    r = ungated(verifier, model_new(f"out = launch(x, y)\n        return {ret}"))
    assert r.error is not None and r.error.kind == "output_mismatch", (r.error, r.details.get("traceback"))
    assert r.compiled and not r.correct and score(r) == 0


# -- seen #6 and #10: coverage is attributed to the candidate's own kernel objects ----------------------------
BURN_IN_BODY = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

_W = torch.randn(384, 384)


def _burn():
    for _ in range(40):
        torch.mm(_W, _W)
    return 0


@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    _burn()
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), 0.0),
             mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        add_relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
        return out
"""


def test_torch_work_inside_a_jit_body_is_not_kernel_time(verifier):
    """The burn is most of each launch's wall time (4.5 GFLOP a launch, sized so that the interpreter's own share stays
    well below half on a loaded box): counted as kernel time, the coverage would be near 1. The honest
    kernel's coverage is only checked to be measured: on a loaded box the judge's round-trip cap moves it anywhere."""
    honest = verifier.verify(REF, HONEST, OPTS)
    r = ungated(verifier, BURN_IN_BODY)
    assert r.correct and r.coverage is not None
    assert r.coverage < 0.5, (r.coverage, r.details)
    assert honest.coverage is not None and honest.coverage > 0, honest.coverage


SAME_NAME_ELSEWHERE = '''
import os
import sys

_helper = """
import triton
import triton.language as tl


@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), 0.0),
             mask=mask)
"""
with open(os.path.join(os.getcwd(), "library_kernels.py"), "w") as _f:
    _f.write(_helper)
sys.path.insert(0, os.getcwd())
import library_kernels
'''


def test_a_same_named_kernel_from_another_file_is_not_the_candidates(verifier):
    """Seen #10: attribution by the JIT object's defining file, not by a name the candidate picks."""
    body = (
        "out = torch.empty_like(x)\n"
        "        library_kernels.add_relu_kernel[(4,)](x, y, out, x.numel(), BLOCK=1024)\n"
        "        return out"
    )
    r = ungated(verifier, model_new(body, prelude=SAME_NAME_ELSEWHERE))
    assert r.hack == "decoy_kernel" and score(r) == 0, (r.hack, r.error, r.details.get("isolation"))


def test_a_decoy_launch_next_to_foreign_work_gets_little_coverage(verifier):
    """The foreign kernel does twelve times the decoy's launches: on CPU coverage is a share of wall time, and with one
    foreign launch the interpreter's per-launch cost put the decoy's share at 0.69 on a loaded box (CI); at twelve
    its fair share is below 0.1, so only a load swing of six times inside one call could reach the bound."""
    body = (
        "out = torch.empty_like(x)\n"
        "        for _ in range(12):\n"
        "            library_kernels.add_relu_kernel[(4,)](x, y, out, x.numel(), BLOCK=1024)\n"
        "        launch(x[:1], y[:1])\n"
        "        return out"
    )
    r = ungated(verifier, model_new(body, prelude=SAME_NAME_ELSEWHERE))
    assert r.correct and r.hack is None and r.coverage < 0.6, r.coverage
