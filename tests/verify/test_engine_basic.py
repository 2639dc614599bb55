"""The engine end to end on CPU: real fork-server children, real Triton interpreter, tiny shapes."""

import threading
from pathlib import Path

import pytest

from drkernel.rl.rewards import score
from drkernel.verify import Verifier, VerifyOptions

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "vector_add"
REFERENCE = (EXAMPLES / "reference.py").read_text()
HONEST = (EXAMPLES / "candidate.py").read_text()
FAST = VerifyOptions(num_perf_trials=2, num_warmup=1, timeout_s=60)

HEADER = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask), mask=mask)

def launch(a, b):
    out = torch.empty_like(a)
    add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), BLOCK=1024)
    return out
"""


def model_new(body: str, init: str = "pass") -> str:
    return (
        HEADER
        + f"""
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        {init}

    def forward(self, a, b):
        {body}
"""
    )


@pytest.fixture(scope="module")
def verifier():
    with Verifier(device="cpu", max_concurrency=2) as v:
        yield v


def test_honest_kernel_passes_with_positive_reward(verifier):
    r = verifier.verify(REFERENCE, HONEST, FAST)
    assert r.status == "ok" and r.compiled and r.correct and r.hack is None and r.error is None
    assert score(r) > 0.5 and r.runtime_ms > 0 and r.ref_runtime_ms > 0 and r.speedup > 0
    assert 0.5 < r.coverage <= 1.0  # the forward is almost all Triton launch time
    assert r.timing_source == "cpu_wall_roundtrip" and r.device == "cpu"
    assert {c.name for c in r.checks} >= {
        "static_gate",
        "correctness",
        "correctness_elementwise",
        "correctness_scale",
        "triton_launches",
        "timing",
        "every_call_checked",
        "coverage",
    }
    assert all(c.passed for c in r.checks)
    assert r.details["kernels"] == ["add_kernel"]
    assert r.details["isolation"]["environment"] == "scrubbed"


def test_correctness_only_evaluation(verifier):
    """measure_performance off: a verdict without timing, re-validation still runs on fresh inputs."""
    opts = FAST.model_copy(update={"measure_performance": False, "measure_coverage": False})
    r = verifier.verify(REFERENCE, HONEST, opts)
    assert r.status == "ok" and r.correct and r.hack is None and r.error is None
    assert r.speedup is None and r.runtime_ms is None and score(r) == pytest.approx(0.5)
    assert "timing" not in {c.name for c in r.checks}


def test_reference_against_itself_without_triton(verifier):
    opts = FAST.model_copy(update={"require_triton": False})
    r = verifier.verify(REFERENCE, REFERENCE, opts)
    assert r.status == "ok" and r.correct and r.hack is None and score(r) >= 0.5
    assert "aliased" in r.details["model_new"]
    r2 = verifier.verify(REFERENCE, REFERENCE, FAST)  # Triton required: rejected before any process starts
    assert r2.error.kind == "no_triton" and not r2.compiled and score(r2) == 0


@pytest.mark.parametrize(
    "source, kind, compiled",
    [
        ("def ModelNew(:\n", "syntax", False),
        (HEADER + "import subprocess\n", "forbidden", False),
        (HEADER + "import not_a_real_module_xyz\n", "import", False),
        (HEADER + "class Other(nn.Module):\n    pass\n", "missing_model_new", False),
        (model_new("return launch(a, b)", init="raise ValueError('bad init')"), "init", True),
        (model_new("raise RuntimeError('boom')"), "runtime", True),
        (model_new("return launch(a, b) + 1.0"), "output_mismatch", True),
        (model_new("return launch(a, b)[:10]"), "output_mismatch", True),
        (model_new("return launch(a, b).double()"), "output_mismatch", True),
        (model_new("while True:\n            pass"), "timeout", True),
        (model_new("import os; os.abort()"), "crash", True),
        (
            HEADER.replace("tl.load(b_ptr + offs, mask=mask)", "tl.no_such_op(b_ptr)")
            + "\nclass ModelNew(nn.Module):\n    def forward(self, a, b):\n        return launch(a, b)\n",
            "triton_compile",
            False,
        ),
    ],
    ids=[
        "syntax",
        "forbidden",
        "import",
        "missing",
        "init",
        "runtime",
        "values",
        "shape",
        "dtype",
        "timeout",
        "crash",
        "triton_compile",
    ],
)
def test_error_classes(verifier, source, kind, compiled):
    """The gate decides syntax and forbidden; every other class is the runtime's, shown without the gate
    (a strict gate rejects e.g. `import os` before the crash it would cause could happen)."""
    opts = FAST.model_copy(update={"timeout_s": 8.0})
    check = verifier.verify if kind in ("syntax", "forbidden") else verifier._verify_ungated
    r = check(REFERENCE, source, opts)
    assert r.status == "ok", r.error
    assert r.error is not None and r.error.kind == kind, (r.error, r.details.get("traceback"))
    assert r.compiled is compiled and not r.correct and score(r) == 0.0


def test_basic_hacks_are_named(verifier):
    alias = verifier.verify(REFERENCE, model_new("launch(a, b); return a.add_(b)"), FAST)
    assert alias.hack == "output_aliases_input" and alias.correct and score(alias) == 0
    decoy = verifier.verify(REFERENCE, model_new("return a + b"), FAST)
    assert decoy.hack == "decoy_kernel" and score(decoy) == 0
    patch = model_new("t = torch; t.allclose = lambda *x, **k: True; return launch(a, b)")
    assert verifier.verify(REFERENCE, patch, FAST).hack == "forbidden_api"
    tamper = verifier._verify_ungated(REFERENCE, patch, FAST)  # the in-process tamper check on its own
    assert tamper.hack == "harness_tampering" and score(tamper) == 0


def test_candidate_output_is_captured_not_leaked(verifier, capfd):
    r = verifier.verify(REFERENCE, model_new("print('hello from the kernel'); return launch(a, b)"), FAST)
    assert r.correct and "hello from the kernel" in r.details["candidate_stdout"]
    assert "hello from the kernel" not in capfd.readouterr().out


def test_broken_reference_is_infra_not_a_zero_reward(verifier):
    r = verifier.verify("import torch\nraise RuntimeError('reference bug')\n", HONEST, FAST)
    assert r.status == "infra_error" and r.error.kind == "reference" and "reference bug" in r.error.message


def test_device_mismatch_is_a_usage_error(verifier):
    r = verifier.verify(REFERENCE, HONEST, VerifyOptions(device="cuda"))
    assert r.status == "infra_error" and r.error.kind == "usage"


def test_concurrent_evaluations_share_one_verifier(verifier):
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(verifier.verify(REFERENCE, HONEST, FAST))) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == 3 and all(r.correct and r.hack is None for r in results)
