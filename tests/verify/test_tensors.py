"""Pure tensor checks: transport round trip, comparison rules, aliasing, input identity."""

import math

import pytest
import torch

from drkernel.verify import tensors


def test_raw_transport_round_trips_dtypes_and_shapes():
    values = [torch.randn(3, 4), torch.arange(6, dtype=torch.int64).reshape(2, 3), torch.randn(5).bfloat16(),
              torch.empty(0, 3), torch.tensor(2.5), 7, None]
    back = tensors.unpack(tensors.pack(values, ipc=False), torch.device("cpu"))
    for a, b in zip(values, back):
        if isinstance(a, torch.Tensor):
            assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
        else:
            assert a == b


def test_tensor_subclasses_and_objects_are_refused():
    class Sneaky(torch.Tensor):
        pass

    with pytest.raises(tensors.OutputError, match="plain torch.Tensor"):
        tensors.pack([torch.zeros(2).as_subclass(Sneaky)], ipc=False)
    with pytest.raises(tensors.OutputError, match="cannot be compared"):
        tensors.pack([object()], ipc=False)
    assert tensors.pack([torch.nn.Parameter(torch.ones(1))], ipc=False)[0][0] == "raw"


def test_compare_rules():
    ref = [torch.tensor([1.0, 2.0, float("nan"), float("inf")])]
    ok, msg, _ = tensors.compare(ref, [torch.tensor([1.001, 2.0, float("nan"), float("inf")])], 1e-2, 1e-2)
    assert ok, msg
    assert "values differ" in tensors.compare(ref, [torch.tensor([1.5, 2.0, float("nan"), float("inf")])], 1e-2, 1e-2)[1]
    assert "NaN" in tensors.compare([torch.ones(2)], [torch.tensor([1.0, float("nan")])], 1e-2, 1e-2)[1]
    assert "Inf" in tensors.compare([torch.ones(2)], [torch.tensor([1.0, float("inf")])], 1e-2, 1e-2)[1]
    assert "shape" in tensors.compare([torch.ones(2)], [torch.ones(3)], 1e-2, 1e-2)[1]
    assert "dtype" in tensors.compare([torch.ones(2)], [torch.ones(2).double()], 1e-2, 1e-2)[1]
    assert "count" in tensors.compare([torch.ones(2)], [torch.ones(2), torch.ones(2)], 1e-2, 1e-2)[1]
    assert tensors.compare([math.pi], [3.1416], 1e-2, 1e-2)[0]


def test_aliasing_sees_views_and_slices():
    x = torch.randn(8)
    assert tensors.aliases_any([x], [x])
    assert tensors.aliases_any([x[2:5]], [x])
    assert tensors.aliases_any([x.view(2, 4)], [x])
    assert not tensors.aliases_any([x.clone()], [x])


def test_identical_is_bitwise_and_nan_aware():
    a = [torch.tensor([1.0, float("nan")]), 3]
    assert tensors.identical(a, [torch.tensor([1.0, float("nan")]), 3])
    assert not tensors.identical(a, [torch.tensor([1.0 + 1e-7, float("nan")]), 3])
    assert not tensors.identical(a, [torch.tensor([1.0, float("nan")]), 4])
