"""The shared builders: an infra_error result, and the traceback tail a child sends in a fault message."""

from __future__ import annotations

from drkernel.rl.rewards import score
from drkernel.types.verify_result import VerifyResult
from drkernel.verify.process import protocol


def test_infra_result_is_no_verdict_and_no_reward():
    r = VerifyResult.infra("timeout", "no slot within 3 s", "cuda", elapsed_s=3.5, details={"queue": 4})
    assert (r.status, r.error.kind, r.error.message, r.device, r.elapsed_s) == (
        "infra_error",
        "timeout",
        "no slot within 3 s",
        "cuda",
        3.5,
    )
    assert r.details == {"queue": 4} and score(r) == 0.0 and not r.correct and r.hack is None
    assert VerifyResult.infra("infra", "m", "cpu").details == {}


def test_traceback_tail_keeps_the_end_and_fits_a_text_field():
    try:
        raise RuntimeError("x" * 2 * protocol.MAX_TEXT + " the end says where")
    except RuntimeError:
        tail = protocol.traceback_tail()
        short = protocol.traceback_tail(100)
    assert len(tail) == protocol.MAX_TEXT and tail.rstrip().endswith("the end says where")
    assert len(short) == 100 and short.rstrip().endswith("the end says where")
