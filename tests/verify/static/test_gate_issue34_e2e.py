"""Issue 34's attack classes end to end through the library Verifier and score, in both timing modes. The gate
refuses them in the verifier's own process (no child runs); the one class that hit the trusted replay also runs
with the gate bypassed, to show the replay refuses it on its own. Each was red at 92950bf."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_gate_issue34 import ATTACKS, HEAD

from drkernel.rl.rewards import score
from drkernel.verify import VerifyOptions
from drkernel.verify.engine import Verifier

HERE = Path(__file__).parents[1] / "candidates"
REFERENCE = (HERE / "ref_relu_1m.py").read_text()
JIT_DEFAULT = (HERE / "issue34_jit_default_rebinds_pricing.py").read_text()
MODES = {
    "measured": VerifyOptions(device="cpu", timing="measured", num_correct_trials=1, timeout_s=300),
    "cpu_model": VerifyOptions(
        device="cpu", timing="cpu_model", num_correct_trials=1, timeout_s=300, measure_coverage=False
    ),
}
E2E = ("module_in_tuple", "reduce_with_a_python_object", "float32_matmul_precision", "property_class_attribute")


@pytest.mark.integration
def test_attack_classes_earn_nothing_through_the_verifier() -> None:
    with Verifier(device="cpu", max_concurrency=1) as verifier:
        for mode, options in MODES.items():
            for name in E2E:
                attack, needle = ATTACKS[name]
                r = verifier.verify(REFERENCE, HEAD + "\n" + attack, options)
                assert score(r) == 0.0 and r.error is not None and r.error.kind == "forbidden", (mode, name, r)
                assert needle in r.error.message and r.hack == "forbidden_api", (mode, name, r.error)
            r = verifier.verify(REFERENCE, JIT_DEFAULT, options)
            assert score(r) == 0.0 and r.error is not None and "not a literal" in r.error.message, (mode, r)


@pytest.mark.integration
def test_the_replay_evaluates_no_jit_default_even_without_the_gate() -> None:
    """At 92950bf the replay imported the rebuilt default, which rebound its model_time: the candidate was priced
    at no launch at all (reward 2.5). Now the replay re-gates and binds only literals: the trace fails."""
    with Verifier(device="cpu", max_concurrency=1) as verifier:
        r = verifier._verify_ungated(REFERENCE, JIT_DEFAULT, MODES["cpu_model"])
    assert score(r) == 0.0 and not r.correct, r
    assert r.error is not None and "does not pass the gate" in r.error.message, r.error
