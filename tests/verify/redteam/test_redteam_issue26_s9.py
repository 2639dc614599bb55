"""Red team, issue 26 session 9: the verifier's timing now ends early (drkernel.verify.judging.precision), the
input-mutation check compares bits (tensors.identical), and spares warm the device's libraries. Each test
asserts what a correct verifier does. Real Verifier on CPU, Triton interpreter, candidate gated as in training."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from drkernel.rl.rewards import score
from drkernel.verify import Verifier, VerifyOptions
from drkernel.verify.judging import tensors

HERE = Path(__file__).parent
CANDIDATES = HERE.parent / "candidates"
REF = (CANDIDATES / "ref_add_relu.py").read_text()


@pytest.mark.integration
def test_a_candidate_that_writes_its_inputs_only_in_unchecked_calls_is_caught():
    """Inputs were compared only after correctness and re-validation calls; timed and coverage calls wrote theirs
    freely, and a candidate can tell the checked calls apart (the first five; the first trial's inputs again)."""
    opts = VerifyOptions(device="cpu", num_correct_trials=5, num_perf_trials=3, num_warmup=1, timeout_s=300)
    with Verifier(device="cpu", max_concurrency=1) as v:
        r = v.verify(REF, (HERE / "mutate_when_unwatched.py").read_text(), opts)
    assert r.status == "ok" and r.correct, r.model_dump_json(indent=1)
    assert r.hack == "input_mutation", f"inputs written in timed calls went unseen: reward {score(r)}, hack {r.hack}"


def test_the_bitwise_input_check_takes_a_references_conjugate_view():
    """The integer view of a conjugate (or negative) view raises: a reference whose get_inputs returns one made the
    judge fail, so every candidate of that problem was an infra_error (masked), not judged."""
    z = torch.randn(8, dtype=torch.complex64).conj()
    assert tensors.identical([z], [z.resolve_conj()])
    changed = z.resolve_conj().clone()
    changed[3] = 0
    assert not tensors.identical([z], [changed])
    assert not tensors.identical([torch.zeros(4).neg()], [torch.zeros(4)])  # -0.0 is not 0.0, through a neg view


def test_a_nan_with_another_payload_written_over_an_input_is_a_change():
    """A candidate may use a NaN input element as scratch space as long as it leaves a NaN there: bits, not
    values, are compared."""
    x = torch.tensor([1.0, float("nan")])
    bits = x.view(torch.int32).clone()
    bits[1] += 1
    assert torch.isnan(bits.view(torch.float32)[1])
    assert not tensors.identical([x], [bits.view(torch.float32)])
