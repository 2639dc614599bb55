"""Pins for the judge's comparison code (drkernel.verify.judging.tensors and the batched fast path in outputs.py):
every way a candidate can differ from the reference is refused with the one message that names it, the
statistics are the documented ones, and the batched path passes a call only when tensors.compare would.
Written against the survivors of a mutmut run over these functions (BENCHMARKS.md, Mutation testing)."""

from __future__ import annotations

import math

import pytest
import torch

from drkernel.verify.judging import tensors
from drkernel.verify.judging.outputs import batch_passes as _batch_passes
from drkernel.verify.judging.outputs import spec_mismatch as _spec_mismatch
from drkernel.verify.judging.outputs import specs as _specs

PASSED = {"max_abs_diff": 0.0, "rel_l2": 0.0, "elementwise": True, "scale": True}


def test_a_passing_comparison_has_no_message_and_the_documented_stats():
    ok, msg, stats = tensors.compare([torch.ones(3), 2.5, 7], [torch.ones(3), 2.5, 7], 1e-2, 1e-2)
    assert (ok, msg, stats) == (True, "", PASSED)


@pytest.mark.parametrize(
    ("reference", "candidate", "message"),
    [
        ([torch.ones(2)], [torch.ones(2), torch.ones(2)], "output count 2 != reference 1"),
        ([torch.ones(2)], [3], "output is int, reference is a tensor"),
        ([torch.ones(2)], [torch.ones(3)], "output shape (3,) != reference (2,)"),
        (
            [torch.ones(2)],
            [torch.ones(2, dtype=torch.float64)],
            "output dtype torch.float64 != reference torch.float32",
        ),
        ([torch.ones(2), torch.ones(2)], [torch.ones(2), torch.ones(1, 2)], "output[1] shape (1, 2) != reference (2,)"),
        ([torch.ones(2), 1.0], [torch.ones(2), 2.0], "output[1] = 2.0, reference 1.0"),
        ([1], [2], "output = 2, reference 1"),
        ([1], [1.0], "output = 1.0, reference 1"),  # an int is not a float, even an equal one
        ([1.0], [True], "output = True, reference 1.0"),  # a bool is not a number here
        ([None], [0], "output = 0, reference None"),
    ],
)
def test_each_mismatch_fails_with_its_own_message(reference, candidate, message):
    ok, msg, _ = tensors.compare(reference, candidate, 1e-2, 1e-2)
    assert not ok and msg == message


def test_integer_and_bool_tensors_are_compared_exactly_and_never_read_as_nan():
    """Only floating outputs can hold NaN/Inf: an integer output equal to the reference passes, one off fails."""
    for dtype in (torch.int64, torch.int32, torch.bool):
        ref = torch.arange(6).to(dtype)
        assert tensors.compare([ref], [ref.clone()], 0.0, 0.0) == (True, "", PASSED)
    ok, msg, _ = tensors.compare([torch.arange(6)], [torch.arange(6) + 1], 0.0, 0.0)
    assert not ok and msg.startswith("output values differ (max abs diff 1")


def test_equal_non_numeric_outputs_pass():
    assert tensors.compare(["relu", None, (1, 2)], ["relu", None, (1, 2)], 1e-2, 1e-2)[:2] == (True, "")


def test_a_value_mismatch_marks_elementwise_and_a_scale_mismatch_marks_scale():
    ok, msg, stats = tensors.compare([torch.ones(4)], [torch.full((4,), 2.0)], 1e-2, 1e-2)
    assert not ok and msg.startswith("output values differ (max abs diff 1")
    assert stats["elementwise"] is False and stats["scale"] is True and stats["max_abs_diff"] == 1.0
    ref = torch.softmax(torch.rand(2, 16384), dim=1)
    ok, msg, stats = tensors.compare([ref], [ref * 1e-6], 1e-2, 1e-2)
    assert not ok and "relative L2 error" in msg
    assert stats["scale"] is False and stats["elementwise"] is True


def test_strict_is_the_default_mode():
    ref = torch.softmax(torch.rand(2, 16384), dim=1)
    assert not tensors.compare([ref], [ref * 1e-6], 1e-2, 1e-2)[0]


def test_rtol_scales_the_elementwise_bound():
    """|c - r| = 0.5 at |r| = 100: inside atol + rtol * |r| = 1.01, far outside atol alone."""
    ok, msg, stats = tensors.compare([torch.full((4,), 100.0)], [torch.full((4,), 100.5)], 1e-2, 1e-2)
    assert ok, msg
    assert stats["rel_l2"] == pytest.approx(5e-3)


def test_the_scale_bound_is_inclusive_like_isclose():
    """Relative L2 error exactly rtol (0.5 / 1.0, exact in binary) passes, as |c - r| == atol does."""
    assert tensors.compare([torch.ones(1)], [torch.full((1,), 1.5)], 0.0, 0.5)[0]
    assert tensors.compare([torch.zeros(4)], [torch.full((4,), 0.25)], 0.25, 0.0)[0]


def test_a_zero_reference_bounds_max_abs_c_by_atol_exactly():
    """float32(0.1) is 0.1000000015: inside isclose's float32 bound, outside the documented max |c| <= atol of an
    all-zero reference; the strict verdict refuses it and the batched path leaves it to compare."""
    z, c = torch.zeros(4), torch.full((4,), 0.1)
    ok, msg, stats = tensors.compare([z], [c], 0.1, 0.0, "strict")
    assert not ok and stats["elementwise"] and stats["rel_l2"] == math.inf and "relative L2 error inf" in msg
    assert tensors.compare([z], [c], 0.1, 0.0, "kernelbench")[0]
    assert _batch_passes([[z]], [[c]], 0.1, 0.0, strict=True) == [None]


def test_an_empty_output_does_not_end_the_comparison():
    ok, msg, _ = tensors.compare([torch.empty(0), torch.ones(2)], [torch.empty(0), torch.full((2,), 5.0)], 1e-2, 1e-2)
    assert not ok and msg.startswith("output[1] values differ")


def test_max_abs_diff_is_over_finite_differences_only():
    ok, _, stats = tensors.compare([torch.tensor([math.inf, 1.0])], [torch.tensor([1.0, 1.0])], 1e-2, 1e-2)
    assert not ok and stats["max_abs_diff"] == 0.0


def test_chunked_norms_accumulate_over_every_chunk(monkeypatch):
    torch.manual_seed(0)
    r = torch.randn(100)
    c = r + 1e-3 * torch.randn(100)
    whole = tensors.compare([r], [c], 1e-2, 1e-2)[2]["rel_l2"]
    monkeypatch.setattr(tensors, "CHUNK", 7)
    assert tensors.compare([r], [c], 1e-2, 1e-2)[2]["rel_l2"] == pytest.approx(whole, rel=1e-12)
    assert whole == pytest.approx(float(torch.linalg.norm(c.double() - r.double()) / torch.linalg.norm(r.double())))


def test_complex_outputs_are_compared_at_their_own_scale():
    """A purely imaginary output scaled down 1e6 is within atol elementwise; its relative L2 error is about 1.
    (Casting complex to float64 would drop the imaginary part and call it exact.)"""
    ref = torch.complex(torch.zeros(64), torch.rand(64) * 1e-4)
    ok, msg, stats = tensors.compare([ref], [ref * 1e-6], 1e-2, 1e-2, "strict")
    assert not ok and "relative L2 error" in msg and stats["rel_l2"] == pytest.approx(1.0, abs=1e-5)
    assert tensors.compare([ref], [ref * 1e-6], 1e-2, 1e-2, "kernelbench")[0]
    ok, _, stats = tensors.compare([ref], [ref * (1 + 1e-3)], 1e-2, 1e-2, "strict")
    assert ok and stats["rel_l2"] == pytest.approx(1e-3, rel=1e-3)
    assert stats["max_abs_diff"] == pytest.approx(float((ref * 1e-3).abs().max()), rel=1e-3)


@pytest.mark.parametrize(
    ("r", "c", "atol", "rtol", "mode", "passes"),
    [
        (1.0, 1.005, 1e-2, 0.0, "kernelbench", True),  # atol is an absolute bound on a scalar in kernelbench mode
        (1.0, 1.005, 1e-2, 0.0, "strict", False),  # strict: relative only (away from zero)
        (1.0, 1.5, 1e-2, 0.0, "strict", False),
        (1.0, 2.0, 1e-2, 1e-2, "strict", False),
        (1e-3, 2e-3, 1e-2, 0.0, "strict", False),  # a small reference is no licence for 2x
        (0.0, 0.25, 0.25, 0.0, "strict", True),  # an exact-zero reference asks |c| <= atol, inclusive
        (0.0, 0.5, 0.25, 0.0, "strict", False),
        (2.0, 2.02, 0.0, 1e-2, "strict", True),
    ],
)
def test_float_scalars(r, c, atol, rtol, mode, passes):
    ok, msg, _ = tensors.compare([r], [c], atol, rtol, mode)
    assert ok is passes and (msg == "") is passes


def test_identical():
    nan = float("nan")
    same = [torch.tensor([1.0, nan]), torch.arange(3), "x"]
    assert tensors.identical(same, [torch.tensor([1.0, nan]), torch.arange(3), "x"])
    for a, b in [
        ([torch.ones(2)], [torch.ones(2), torch.ones(2)]),
        ([torch.ones(1)], [1.0]),
        ([1.0], [torch.ones(1)]),
        ([torch.ones(2)], [torch.ones(3)]),
        ([torch.ones(2)], [torch.ones(2, dtype=torch.float64)]),
        ([torch.tensor([nan])], [torch.tensor([1.0])]),
        ([torch.tensor([1.0])], [torch.tensor([nan])]),
        ([torch.tensor([1.0, 2.0])], [torch.tensor([1.0, 2.0000002])]),
        ([torch.arange(3)], [torch.arange(3) + 1]),
        ([torch.tensor([True, False])], [torch.tensor([True, True])]),
    ]:
        assert not tensors.identical(a, b), (a, b)


def test_specs_describe_each_output():
    values = [torch.ones(2, 3, dtype=torch.float16), 1.5, torch.zeros(0, dtype=torch.int64)]
    assert _specs(values) == [
        {"kind": "tensor", "dtype": "float16", "shape": [2, 3], "nbytes": 12},
        {"kind": "scalar"},
        {"kind": "tensor", "dtype": "int64", "shape": [0], "nbytes": 0},
    ]


def test_spec_mismatch_names_the_first_difference():
    want = _specs([torch.ones(2, 3)])
    assert _spec_mismatch(_specs([torch.ones(2, 3)]), want) is None
    assert _spec_mismatch(_specs([1.0]), _specs([2])) is None
    assert _spec_mismatch(_specs([torch.ones(2, 3), 1.0]), want) == "output count 2 != reference 1"
    assert _spec_mismatch(_specs([1.0]), want) == "output is a scalar, reference is a tensor"
    assert _spec_mismatch(_specs([torch.ones(3, 2)]), want) == "output shape (3, 2) != reference (2, 3)"
    assert _spec_mismatch(_specs([torch.ones(2, 3).half()]), want) == "output dtype float16 != reference float32"
    two = _specs([torch.ones(1), torch.ones(2)])
    assert (
        _spec_mismatch(_specs([torch.ones(1), torch.ones(2, dtype=torch.int32)]), two)
        == "output[1] dtype int32 != reference float32"
    )
    assert _spec_mismatch(_specs([torch.ones(1), 2]), two) == "output[1] is a scalar, reference is a tensor"


def _agrees_with_compare(ref: list, cand: list, atol: float, rtol: float, strict: bool) -> list:
    quick = _batch_passes(ref, cand, atol, rtol, strict)
    assert quick is not None
    for j, q in enumerate(quick):
        if q is not None:
            ok, _, stats = tensors.compare(ref[j], cand[j], atol, rtol, "strict" if strict else "kernelbench")
            assert ok and set(q) == set(PASSED) and q["elementwise"] is True and q["scale"] is True
            assert q["max_abs_diff"] == pytest.approx(stats["max_abs_diff"])
            assert q["rel_l2"] == pytest.approx(stats["rel_l2"], abs=1e-12)
    return quick


def test_batch_passes_matching_nan_and_inf_and_uses_rtol():
    ref = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 100.0])
    quick = _agrees_with_compare(
        [[ref]], [[torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 100.5])]], 1e-2, 1e-2, True
    )
    assert quick[0] is not None and quick[0]["max_abs_diff"] == 0.5


def test_batch_refuses_values_off_in_either_mode():
    torch.manual_seed(1)
    ref = [[torch.randn(8)], [torch.randn(8)]]
    for strict in (True, False):
        assert _agrees_with_compare(ref, [[ref[0][0] + 0.5], [ref[1][0].clone()]], 1e-2, 1e-2, strict)[0] is None


def test_batch_zero_reference():
    """All-zero reference: |c| <= atol (inclusive) passes with relative error 0, in both modes."""
    z = [[torch.zeros(4)]]
    for strict in (True, False):
        quick = _agrees_with_compare(z, [[torch.zeros(4)]], 0.25, 0.0, strict)
        assert quick[0] == PASSED
        quick = _agrees_with_compare(z, [[torch.full((4,), 0.25)]], 0.25, 0.0, strict)
        assert quick[0] == {**PASSED, "max_abs_diff": 0.25}


def test_batch_leaves_a_borderline_scale_to_compare():
    """Relative error exactly rtol passes tensors.compare; the batch must not decide it."""
    ref, cand = [[torch.ones(1)]], [[torch.full((1,), 1.5)]]
    assert tensors.compare(ref[0], cand[0], 0.0, 0.5)[0]
    assert _batch_passes(ref, cand, 0.0, 0.5, strict=True) == [None]
    assert _batch_passes(ref, cand, 0.0, 0.5, strict=False) == [{**PASSED, "max_abs_diff": 0.5, "rel_l2": 0.5}]


@pytest.mark.parametrize(
    ("ref", "cand"),
    [
        ([], []),
        ([[torch.ones(3)], [torch.ones(3)]], [[torch.ones(3)]]),  # a call missing
        ([[torch.ones(3)], [torch.ones(3)]], [[torch.ones(3)], [torch.ones(3), torch.ones(3)]]),  # an extra output
        ([[torch.ones(3)], [torch.ones(3), torch.ones(3)]], [[torch.ones(3)], [torch.ones(3)]]),
        ([[torch.ones(2, 3)]], [[torch.ones(3, 2)]]),  # same numel, other shape
        ([[torch.ones(3)]], [[torch.ones(4)]]),
        ([[torch.ones(3)]], [[torch.ones(3, dtype=torch.float64)]]),
        ([[torch.ones(3)]], [[1.0]]),
        ([[torch.empty(0)]], [[torch.empty(0)]]),
    ],
)
def test_batch_leaves_any_irregular_round_to_compare(ref, cand):
    assert _batch_passes(ref, cand, 1e-2, 1e-2, True) is None


def test_batch_size_limit_is_the_comparison_chunk(monkeypatch):
    monkeypatch.setattr(tensors, "CHUNK", 66)
    assert _batch_passes([[torch.ones(33)]] * 2, [[torch.ones(33)]] * 2, 1e-2, 1e-2, True) is not None
    assert _batch_passes([[torch.ones(34)]] * 2, [[torch.ones(34)]] * 2, 1e-2, 1e-2, True) is None
