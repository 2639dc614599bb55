"""The message schema as hostile input: what a candidate's process writes is never unpickled, and every
frame that breaks the schema is refused before anything is allocated for it."""

from __future__ import annotations

import json
import multiprocessing
import pickle

import pytest
import torch

from drkernel.verify import protocol


def pipe():
    return multiprocessing.Pipe()


def test_values_round_trip_dtypes_shapes_and_scalars():
    values = [torch.randn(3, 4), torch.arange(6, dtype=torch.int64).reshape(2, 3), torch.randn(5).bfloat16(),
              torch.empty(0, 3), torch.tensor(2.5), 7, None, 1.5, True]
    specs, payload = protocol.encode_values(values)
    a, b = pipe()
    protocol.send(a, {"type": "outputs", "calls": [specs], "inputs": None, "evidence": {}}, payload)
    header, data = protocol.recv(b, max_payload=len(payload))
    [back] = protocol.decode_calls(header["calls"], data)
    for x, y in zip(values, back):
        if isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)
        else:
            assert x == y and type(x) is type(y)


class Boom:
    def __reduce__(self):
        return (exec, ("open('/tmp/drkernel_protocol_pwned', 'w').write('x')",))


def test_a_pickle_frame_is_rejected_and_never_runs(tmp_path):
    """Seen #1: a pickled object whose unpickling runs code. The decoder reads JSON only."""
    a, b = pipe()
    a.send_bytes(pickle.dumps(Boom()))
    with pytest.raises(protocol.ProtocolError, match="not JSON"):
        protocol.recv(b)
    import os
    assert not os.path.exists("/tmp/drkernel_protocol_pwned")


@pytest.mark.parametrize("header, match", [
    ({"type": "ran", "evidence": {}}, "unexpected fields"),
    ({"type": "outputs", "calls": [], "inputs": None, "evidence": []}, "evidence is an object"),
    ({"type": "nope"}, "unknown message type"),
    ({"type": "staged", "extra": 1}, "unexpected fields"),
    ({"type": "fault", "kind": "infra", "message": "m", "detail": "", "phase": "run"}, "unknown fault kind"),
    ({"type": "outputs", "calls": [[{"kind": "tensor", "dtype": "float32", "shape": [2], "nbytes": 9,
                                     "device": "cpu"}]], "inputs": None, "evidence": {}}, "is 8 bytes, not 9"),
    ({"type": "outputs", "calls": [[{"kind": "tensor", "dtype": "object", "shape": [2], "nbytes": 16,
                                     "device": "cpu"}]], "inputs": None, "evidence": {}}, "not one the verifier compares"),
    ({"type": "outputs", "calls": [[{"kind": "tensor", "dtype": "float32", "shape": [-1], "nbytes": 0,
                                     "device": "cpu"}]], "inputs": None, "evidence": {}}, "integer in"),
    ({"type": "outputs", "calls": [[{"kind": "tensor", "dtype": "float32", "shape": [1] * 9, "nbytes": 4,
                                     "device": "cpu"}]], "inputs": None, "evidence": {}}, "at most 8 sizes"),
    ({"type": "coverage", "kernel_ms_per_call": 1.0, "fraction": 7.0, "source": "x", "detail": {},
      "collisions": []}, "finite number in"),
    ([1, 2], "JSON object"),
])
def test_schema_violations(header, match):
    a, b = pipe()
    a.send_bytes(json.dumps(header).encode())
    with pytest.raises(protocol.ProtocolError, match=match):
        protocol.recv(b, max_payload=1 << 20)


def test_nan_and_oversized_frames():
    a, b = pipe()
    a.send_bytes(b'{"type": "coverage", "kernel_ms_per_call": NaN, "fraction": 0.5, "source": "x", '
                 b'"detail": {}, "collisions": []}')
    with pytest.raises(protocol.ProtocolError, match="non-finite|not JSON"):
        protocol.recv(b)
    a.send_bytes(b"{" + b" " * (protocol.MAX_HEADER + 10) + b"}")
    with pytest.raises(protocol.ProtocolError, match="header frame rejected"):
        protocol.recv(b)


def test_payload_caps_are_enforced_before_reading():
    specs, payload = protocol.encode_values([torch.zeros(1000)])
    a, b = pipe()
    protocol.send(a, {"type": "outputs", "calls": [specs], "inputs": None, "evidence": {}}, payload)
    with pytest.raises(protocol.ProtocolError, match="at most 100 accepted"):
        protocol.recv(b, max_payload=100)
    # A header announcing less than it sends: the length is checked exactly.
    a, b = pipe()
    a.send_bytes(json.dumps({"type": "outputs", "calls": [specs], "inputs": None, "payload": 8}).encode())
    a.send_bytes(payload)
    with pytest.raises(protocol.ProtocolError):
        protocol.recv(b, max_payload=8)


def test_payload_must_match_specs_exactly():
    specs, payload = protocol.encode_values([torch.zeros(4)])
    with pytest.raises(protocol.ProtocolError, match="beyond"):
        protocol.decode_calls([specs], payload + b"\0" * 4)
    with pytest.raises(protocol.ProtocolError, match="shorter"):
        protocol.decode_calls([specs], payload[:-4])


def test_precheck_runs_before_the_payload_is_read():
    specs, payload = protocol.encode_values([torch.zeros(4)])
    a, b = pipe()
    protocol.send(a, {"type": "outputs", "calls": [specs], "inputs": None, "evidence": {}}, payload)

    def refuse(header):
        raise RuntimeError("shape differs from the reference")

    with pytest.raises(RuntimeError, match="shape differs"):
        protocol.recv(b, max_payload=16, precheck=refuse)
