"""Issue 34, red-team F3/F6/F7: the candidate's own process checks every Triton launch
(drkernel/verify/harness/launches.py). Run through `_verify_ungated`, so the process holds without the static gate:
a kernel that pokes Python objects through raw interpreter pointers, a host object shaped like a tensor and a list
of tensors are each a candidate error, never a reward."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkernel.rl.rewards import score
from drkernel.verify import Verifier, VerifyOptions

pytestmark = pytest.mark.integration

CANDIDATES = Path(__file__).parents[1] / "candidates"
OPTS = VerifyOptions(
    device="cpu", timing="measured", num_correct_trials=1, num_perf_trials=2, num_warmup=1, timeout_s=300
)


@pytest.fixture(scope="module")
def verifier():
    with Verifier(device="cpu", max_concurrency=2) as v:
        yield v


@pytest.mark.parametrize(
    ("reference", "candidate", "message"),
    [
        ("ref_matmul_rt34.py", "redteam34_escape_pointer_poke_matmul.py", "outside the buffers"),
        ("ref_matmul_rt34.py", "redteam34_fake_tensor_arg.py", "kernel argument x_ptr is a Lazy"),
        ("ref_mul_rt34.py", "redteam34_list_tensor_mul.py", "kernel argument T is a list"),
        ("ref_mul_rt34.py", "redteam34_constexpr_tensor_mul.py", "is a tl.constexpr handed a Tensor"),
    ],
)
def test_a_launch_outside_its_tensors_or_with_other_arguments_earns_nothing(verifier, reference, candidate, message):
    r = verifier._verify_ungated((CANDIDATES / reference).read_text(), (CANDIDATES / candidate).read_text(), OPTS)
    assert r.status == "ok", r.error
    assert score(r) == 0 and not r.correct, (score(r), r.error, r.details.get("speedup"))
    assert message in str(r.error), r.error
