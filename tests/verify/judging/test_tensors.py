"""The judge's comparisons: elementwise AND at the output's scale, and bitwise input identity."""

import math

import torch

from drkernel.verify.judging import tensors


def test_compare_rules():
    ref = [torch.tensor([1.0, 2.0, float("nan"), float("inf")])]
    ok, msg, _ = tensors.compare(ref, [torch.tensor([1.001, 2.0, float("nan"), float("inf")])], 1e-2, 1e-2)
    assert ok, msg
    assert (
        "values differ" in tensors.compare(ref, [torch.tensor([1.5, 2.0, float("nan"), float("inf")])], 1e-2, 1e-2)[1]
    )
    assert "NaN" in tensors.compare([torch.ones(2)], [torch.tensor([1.0, float("nan")])], 1e-2, 1e-2)[1]
    assert "Inf" in tensors.compare([torch.ones(2)], [torch.tensor([1.0, float("inf")])], 1e-2, 1e-2)[1]
    assert "shape" in tensors.compare([torch.ones(2)], [torch.ones(3)], 1e-2, 1e-2)[1]
    assert "dtype" in tensors.compare([torch.ones(2)], [torch.ones(2).double()], 1e-2, 1e-2)[1]
    assert "count" in tensors.compare([torch.ones(2)], [torch.ones(2), torch.ones(2)], 1e-2, 1e-2)[1]
    assert tensors.compare([math.pi], [3.1416], 1e-2, 1e-2)[0]


def test_tiny_softmax_scaled_down_passes_kernelbench_but_not_strict():
    """Seen #7: a 16384-wide softmax is ~6e-5 per element, below atol; x*1e-6 is wrong at its own scale."""
    x = torch.rand(4, 16384)
    ref = torch.softmax(x, dim=1)
    fake = x * 1e-6
    ok, _, stats = tensors.compare([ref], [fake], 1e-2, 1e-2, "kernelbench")
    assert ok and stats["elementwise"]
    ok, msg, stats = tensors.compare([ref], [fake], 1e-2, 1e-2, "strict")
    assert not ok and not stats["scale"] and stats["elementwise"] and "relative L2" in msg
    assert stats["rel_l2"] > 0.5
    honest = torch.softmax(x.double(), dim=1).float()
    assert tensors.compare([ref], [honest], 1e-2, 1e-2, "strict")[0]


def test_scale_check_with_a_zero_reference_uses_atol():
    z = torch.zeros(8)
    assert tensors.compare([z], [torch.full((8,), 1e-3)], 1e-2, 1e-2, "strict")[0]
    assert not tensors.compare([z], [torch.full((8,), 0.5)], 1e-2, 1e-2, "strict")[0]


def test_chunked_comparison_matches_whole(monkeypatch):
    monkeypatch.setattr(tensors, "CHUNK", 7)
    r = torch.randn(100)
    c = r.clone()
    c[93] += 0.5
    ok, msg, stats = tensors.compare([r], [c], 1e-2, 1e-2)
    assert not ok and abs(stats["max_abs_diff"] - 0.5) < 1e-6 and "values differ" in msg


def test_identical_is_bitwise_and_nan_aware():
    a = [torch.tensor([1.0, float("nan")]), 3]
    assert tensors.identical(a, [torch.tensor([1.0, float("nan")]), 3])
    assert not tensors.identical(a, [torch.tensor([1.0 + 1e-7, float("nan")]), 3])
    assert not tensors.identical(a, [torch.tensor([1.0, float("nan")]), 4])


def test_identical_compares_bits_of_strided_inputs():
    """A candidate that writes -0.0 over 0.0 changed its input; strided views compare element by element."""
    assert not tensors.identical([torch.zeros(3)], [-torch.zeros(3)])
    base = torch.arange(12.0).reshape(3, 4)
    assert tensors.identical([base[:, ::2]], [base.clone()[:, ::2]])
    changed = base.clone()
    changed[2, 2] = 99.0
    assert not tensors.identical([base[:, ::2]], [changed[:, ::2]])
