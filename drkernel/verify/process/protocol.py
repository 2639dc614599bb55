"""The messages of an evaluation: one schema for every channel a child process writes.

A message is a JSON header (one `send_bytes` frame, at most MAX_HEADER bytes) followed, when the
header's `payload` is non-zero, by one frame of raw bytes (tensor data, CPU/NPU path). Nothing a
child sends is unpickled: `recv` decodes a frame as hostile input (size caps before reading, a fixed
set of message types and keys, typed and bounded fields, finite numbers) and `decode_values` turns
a payload into tensors only after checking dtype against an allow-list and that shape, numel and
byte length agree exactly. The trusted side may pickle what it sends to children it alone writes to
(CUDA IPC handles of its own tensors travel that way); the reverse direction never carries pickle.
"""

from __future__ import annotations

import json
import math
import re
import traceback
from collections.abc import Callable
from typing import Any

MAX_HEADER = 64 * 1024
MAX_TEXT = 4000
MAX_LIST = 64
MAX_DIMS = 8
MAX_DIM = 1 << 40
MAX_INT = 1 << 63
ITEMSIZE = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "complex64": 8,
    "complex128": 16,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}


class ProtocolError(ValueError):
    """A frame that breaks the schema: the sender is not the harness we wrote, or was tampered with."""


def traceback_tail(limit: int = MAX_TEXT) -> str:
    """The end of the traceback being handled (its last frames say where it failed), cut to what one text
    field of a message holds."""
    return traceback.format_exc()[-limit:]


def _show(v: Any, limit: int = 120) -> str:
    """A bounded description of a hostile value for an error message; never raises (repr of a huge int
    raises ValueError, of a deep structure RecursionError)."""
    try:
        text = repr(v)
    except Exception:  # any failure to describe the value still yields a ProtocolError
        return f"<{type(v).__name__}>"
    return text if len(text) <= limit else text[:limit] + " ..."


# -- field validators: each returns the cleaned value or raises ProtocolError ---------------------------
def _text(limit: int = MAX_TEXT) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if not isinstance(v, str):
            raise ProtocolError(f"expected a string, got {type(v).__name__}")
        return v if len(v) <= limit else v[:limit] + " ..."

    return check


def _number(lo: float = 0.0, hi: float = 1e12) -> Callable[[Any], float]:
    def check(v: Any) -> float:
        # Range first: math.isfinite overflows on an int beyond float range; the bounds are finite floats.
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi or not math.isfinite(v):
            raise ProtocolError(f"expected a finite number in [{lo}, {hi}], got {_show(v)}")
        return float(v)

    return check


def _optional(inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else inner(v)


def _flag(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ProtocolError(f"expected a boolean, got {type(v).__name__}")
    return v


def _int(lo: int = 0, hi: int = MAX_INT) -> Callable[[Any], int]:
    def check(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ProtocolError(f"expected an integer in [{lo}, {hi}], got {_show(v)}")
        return v

    return check


def _texts(v: Any) -> list[str]:
    if not isinstance(v, list) or len(v) > MAX_LIST:
        raise ProtocolError(f"expected a list of at most {MAX_LIST} strings")
    return [_text(400)(x) for x in v]


def _text_map(v: Any) -> dict[str, str]:
    if not isinstance(v, dict) or len(v) > MAX_LIST:
        raise ProtocolError(f"expected an object of at most {MAX_LIST} string fields")
    return {_text(100)(k): _text(400)(x) for k, x in v.items()}


def _number_map(v: Any) -> dict[str, float]:
    if not isinstance(v, dict) or len(v) > MAX_LIST:
        raise ProtocolError(f"expected an object of at most {MAX_LIST} numbers")
    return {_text(100)(k): _number(0, 1e12)(x) for k, x in v.items()}


def _shape(v: Any) -> list[int]:
    if not isinstance(v, list) or len(v) > MAX_DIMS:
        raise ProtocolError(f"a shape is a list of at most {MAX_DIMS} sizes")
    return [_int(0, MAX_DIM)(d) for d in v]


def _value_spec(v: Any) -> dict[str, Any]:
    """One returned value: a tensor (dtype, shape, byte count) or a plain scalar."""
    if not isinstance(v, dict):
        raise ProtocolError("a value spec is an object")
    kind = v.get("kind")
    if kind == "tensor":
        _keys(v, {"kind", "dtype", "shape", "nbytes", "device"})
        dtype = _text(20)(v.get("dtype"))
        if dtype not in ITEMSIZE:
            raise ProtocolError(f"dtype {dtype!r} is not one the verifier compares")
        shape = _shape(v.get("shape"))
        numel = math.prod(shape)
        nbytes = _int()(v.get("nbytes"))
        if numel * ITEMSIZE[dtype] != nbytes:
            raise ProtocolError(f"{dtype} tensor of shape {shape} is {numel * ITEMSIZE[dtype]} bytes, not {nbytes}")
        return {
            "kind": "tensor",
            "dtype": dtype,
            "shape": shape,
            "nbytes": nbytes,
            "device": _text(40)(v.get("device")),
        }
    if kind == "scalar":
        _keys(v, {"kind", "type", "value"})
        typ = v.get("type")
        raw = v.get("value")
        if typ == "float":
            try:
                value: Any = float(_text(40)(raw))
            except ValueError as e:
                raise ProtocolError(f"bad float literal {_show(raw)}") from e
        elif typ == "int":
            value = _int(-MAX_INT, MAX_INT)(raw)
        elif typ == "bool":
            value = _flag(raw)
        elif typ == "none":
            if raw is not None:
                raise ProtocolError("a none scalar carries no value")
            value = None
        elif typ == "str":
            value = _text(1000)(raw)
        else:
            raise ProtocolError(f"unknown scalar type {_show(typ)}")
        return {"kind": "scalar", "type": typ, "value": value}
    raise ProtocolError(f"unknown value kind {_show(kind)}")


def _value_specs(v: Any) -> list[dict[str, Any]]:
    if not isinstance(v, list) or len(v) > MAX_LIST:
        raise ProtocolError(f"at most {MAX_LIST} values per call")
    return [_value_spec(x) for x in v]


def _calls(v: Any) -> list[list[dict[str, Any]]]:
    if not isinstance(v, list) or len(v) > MAX_LIST:
        raise ProtocolError(f"at most {MAX_LIST} calls per message")
    return [_value_specs(x) for x in v]


def _evidence(v: Any) -> dict[str, Any]:
    """What the harness inside a runner saw during its calls (believed only to lower a reward)."""
    if not isinstance(v, dict):
        raise ProtocolError("evidence is an object")
    _keys(v, {"decoy_calls", "tampered", "side_processes", "stream_mismatch", "aliases", "launches", "kernel_s"})
    return {
        "decoy_calls": _texts(v.get("decoy_calls", [])),
        "tampered": _texts(v.get("tampered", [])),
        "side_processes": _texts(v.get("side_processes", [])),
        "stream_mismatch": _texts(v.get("stream_mismatch", [])),
        "aliases": _texts(v.get("aliases", [])),
        "launches": _int(0, 1 << 40)(v.get("launches", 0)),
        "kernel_s": _number(0.0, 1e9)(v.get("kernel_s", 0.0)),
    }


def _keys(obj: dict[Any, Any], allowed: set[str]) -> None:
    """Only the schema's keys; keys are compared as strings (a Python caller may pass non-str keys, which
    neither hash-compare with nor sort against str ones)."""
    extra = [k for k in obj if not (isinstance(k, str) and k in allowed)]
    if extra:
        raise ProtocolError(f"unexpected fields {sorted(_show(k, 40) for k in extra)[:5]}"[:300])


CANDIDATE_FAULTS = frozenset(
    {"syntax", "import", "missing_model_new", "init", "triton_compile", "runtime", "output_mismatch"}
)


def _fault_kind(v: Any) -> str:
    if not isinstance(v, str) or v not in CANDIDATE_FAULTS:  # type first: `[] in frozenset` is a TypeError
        raise ProtocolError(f"unknown fault kind {_show(v)}")
    return v


# -- the candidate's trace for the CPU cost model (drkernel.verify.cost_model.trace describes the format) -----------
MAX_TRACE_EVENTS = 512
MAX_TRACE_BUFFERS = 1024
TRACE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
ATEN_NAME = re.compile(r"^aten::[a-z0-9_]{1,80}(\.[A-Za-z0-9_]{1,40})?$")
NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def _trace_ref(v: Any) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise ProtocolError("a buffer reference is an object")
    _keys(v, {"buf", "offset", "shape", "stride", "dtype", "conj", "neg"})
    dtype = _text(20)(v.get("dtype"))
    if dtype not in ITEMSIZE:
        raise ProtocolError(f"dtype {_show(dtype)} is not one the replay knows")
    shape, stride = _shape(v.get("shape")), _shape(v.get("stride"))
    if len(shape) != len(stride):
        raise ProtocolError("shape and stride differ in length")
    bits = {k: True for k in ("conj", "neg") if _flag(v.get(k, False))}
    return {
        "buf": _int(0, MAX_TRACE_BUFFERS)(v.get("buf")),
        "offset": _int(0, MAX_DIM)(v.get("offset")),
        "shape": shape,
        "stride": stride,
        "dtype": dtype,
    } | bits


def _trace_value(v: Any, depth: int = 0) -> Any:
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return _int(-MAX_INT, MAX_INT)(v)
    if isinstance(v, float):
        return _number(-1e308, 1e308)(v)
    if isinstance(v, str):
        return _text(64)(v)
    if not isinstance(v, dict) or len(v) != 1 or depth > 3:
        raise ProtocolError("a traced value is a scalar or a one-key object, nested at most 3 deep")
    ((key, inner),) = v.items()
    if key == "t":
        return {"t": _trace_ref(inner)}
    if key == "list":
        if not isinstance(inner, list) or len(inner) > MAX_LIST:
            raise ProtocolError(f"a traced list holds at most {MAX_LIST} values")
        return {"list": [_trace_value(x, depth + 1) for x in inner]}
    if key == "float":
        if not isinstance(inner, str) or inner not in NON_FINITE:
            raise ProtocolError(f"unknown float {_show(inner)}")
        return {"float": inner}
    if key in ("dtype", "device", "layout", "memory_format"):
        return {key: _text(40)(inner)}
    raise ProtocolError(f"unknown traced value kind {_show(key)}")


def _trace_buffer(v: Any) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise ProtocolError("a buffer is an object")
    kind = v.get("kind")
    if kind == "input":
        _keys(v, {"kind", "index"})
        return {"kind": "input", "index": _int(0, MAX_LIST)(v.get("index"))}
    if kind in ("state", "fresh", "literal"):
        _keys(v, {"kind", "nbytes"})
        return {"kind": kind, "nbytes": _int(0, 1 << 40)(v.get("nbytes"))}
    raise ProtocolError(f"unknown buffer kind {_show(kind)}")


def _trace_event(v: Any) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise ProtocolError("an event is an object")
    op = v.get("op")
    if op == "alloc":
        _keys(v, {"op", "buf", "nbytes"})
        return {
            "op": "alloc",
            "buf": _int(0, MAX_TRACE_BUFFERS)(v.get("buf")),
            "nbytes": _int(0, 1 << 40)(v.get("nbytes")),
        }
    if op == "aten":
        _keys(v, {"op", "name", "args", "kwargs", "outs"})
        name = _text(130)(v.get("name"))
        if not ATEN_NAME.match(name):
            raise ProtocolError(f"not an aten operator name: {_show(name)}")
        args, kwargs, outs = v.get("args"), v.get("kwargs"), v.get("outs")
        if (
            not isinstance(args, list)
            or len(args) > MAX_LIST
            or not isinstance(kwargs, dict)
            or len(kwargs) > MAX_LIST
            or not isinstance(outs, list)
            or len(outs) > MAX_LIST
        ):
            raise ProtocolError("aten event arguments out of bounds")
        return {
            "op": "aten",
            "name": name,
            "args": [_trace_value(a) for a in args],
            "kwargs": {_text(64)(k): _trace_value(x) for k, x in kwargs.items()},
            "outs": [None if o is None else _trace_ref(o) for o in outs],
        }
    if op == "launch":
        _keys(v, {"op", "kernel", "grid", "args"})
        kernel = _text(100)(v.get("kernel"))
        if not TRACE_NAME.match(kernel):
            raise ProtocolError(f"not a kernel name: {_show(kernel)}")
        grid = v.get("grid")
        if not isinstance(grid, list) or len(grid) != 3:
            raise ProtocolError("a grid is three sizes")
        grid = [_int(0, 1 << 31)(g) for g in grid]
        args = v.get("args")
        if not isinstance(args, dict) or len(args) > MAX_LIST:
            raise ProtocolError(f"at most {MAX_LIST} kernel arguments")
        return {
            "op": "launch",
            "kernel": kernel,
            "grid": grid,
            "args": {_text(100)(k): _trace_value(x) for k, x in args.items()},
        }
    raise ProtocolError(f"unknown event {_show(op)}")


def _bounded(check: Callable[[Any], Any], limit: int) -> Callable[[Any], list[Any]]:
    def run(v: Any) -> list[Any]:
        if not isinstance(v, list) or len(v) > limit:
            raise ProtocolError(f"expected a list of at most {limit} entries")
        return [check(x) for x in v]

    return run


def _digest_list(v: Any) -> list[str]:
    if not isinstance(v, list) or len(v) > 256:
        raise ProtocolError("at most 256 state digests")
    return [_text(64)(x) for x in v]


# type -> {field: validator}; every field is required unless its validator accepts the absent value (None).
SCHEMAS: dict[str, dict[str, Callable[[Any], Any]]] = {
    "isolation": {"layers": _text_map},
    "reference_failed": {"message": _text()},  # believed only before the candidate is imported
    "importing": {},
    "loaded": {
        "load_s": _number(),
        "kernels": _texts,
        "launch_hook": _text(200),
        "aliased": _flag,
        "state": _optional(_digest_list),
    },  # CPU model: digests of the state a trace may bring
    "fault": {"kind": _fault_kind, "message": _text(), "detail": _text(), "phase": _text(100)},
    "staged": {},
    "ran": {"digest": _optional(_text(64))},  # CPU/NPU: blake2b of the outputs' bytes, checked on collect
    "outputs": {"calls": _calls, "inputs": _optional(_calls), "evidence": _evidence},
    "filled": {},
    "bound": {},
    "trace": {
        "buffers": _bounded(_trace_buffer, MAX_TRACE_BUFFERS),
        "events": _bounded(_trace_event, MAX_TRACE_EVENTS),
        "outputs": _bounded(_trace_ref, MAX_LIST),
    },
    "modelled": {
        "verdict": _text(20),
        "message": _text(),
        "cand_s": _number(0, 1e6),
        "ref_s": _number(0, 1e6),
        "cand": _number_map,
        "ref": _number_map,
        "launches": _texts,
    },
    "coverage": {
        "kernel_ms_per_call": _optional(_number(0, 1e9)),
        "fraction": _optional(_number(0, 1)),
        "source": _text(100),
        "detail": _number_map,
        "collisions": _texts,
    },
}


def validate(header: Any) -> dict[str, Any]:
    """Check a decoded header against its schema; return a clean copy.

    Every malformed header raises ProtocolError and nothing else: the judge turns exactly that into a
    verdict on the candidate (reward 0), while any other exception reads as a judge failure, which would
    mask a wrong candidate as infra_error. The validators check types before hashing, comparing or
    converting; the last clause only keeps an overlooked case from becoming that mask."""
    try:
        return _validate(header)
    except ProtocolError:
        raise
    except Exception as e:  # hostile input must not pick the judge's failure mode
        raise ProtocolError(f"malformed header ({type(e).__name__})") from e


def _validate(header: Any) -> dict[str, Any]:
    if not isinstance(header, dict):
        raise ProtocolError("a header is a JSON object")
    kind = header.get("type")
    if not isinstance(kind, str) or kind not in SCHEMAS:  # type first: `[] in dict` is a TypeError
        raise ProtocolError(f"unknown message type {_show(kind)}")
    schema = SCHEMAS[kind]
    _keys(header, set(schema) | {"type", "payload"})
    clean: dict[str, Any] = {"type": kind, "payload": _int(0, MAX_INT)(header.get("payload", 0))}
    for key, check in schema.items():
        clean[key] = check(header.get(key))
    return clean


def _no_constants(name: str) -> Any:
    raise ProtocolError(f"non-finite number {name} in a header")


def send(conn: Any, header: dict[str, Any], payload: bytes | memoryview | None = None) -> None:
    """Write one message: the JSON header frame, then the payload frame if there is one."""
    size = len(payload) if payload is not None else 0
    data = json.dumps({**header, "payload": size}, allow_nan=False, separators=(",", ":")).encode()
    if len(data) > MAX_HEADER:
        raise ProtocolError(f"header of {len(data)} bytes exceeds {MAX_HEADER}")
    conn.send_bytes(data)
    if size:
        conn.send_bytes(payload)


def recv(
    conn: Any, max_payload: int = 0, precheck: Callable[[dict[str, Any]], None] | None = None
) -> tuple[dict[str, Any], bytes]:
    """Read and validate one message; `max_payload` caps the payload frame before it is read, and
    `precheck` may reject the validated header (e.g. output specs against the reference's) first."""
    try:
        raw = conn.recv_bytes(MAX_HEADER)
    except OSError as e:  # multiprocessing raises OSError("bad message length") past the cap
        raise ProtocolError(f"header frame rejected: {e}") from e
    try:
        header = json.loads(raw.decode("utf-8"), parse_constant=_no_constants)
    except (ValueError, RecursionError) as e:  # JSONDecodeError, bad UTF-8, an int past the digit limit
        raise ProtocolError(f"header is not JSON: {type(e).__name__}") from e
    clean = validate(header)
    if precheck is not None:
        precheck(clean)
    size = clean["payload"]
    if size > max_payload:
        raise ProtocolError(f"payload of {size} bytes announced, at most {max_payload} accepted here")
    if not size:
        return clean, b""
    try:
        payload = conn.recv_bytes(max_payload)
    except OSError as e:
        raise ProtocolError(f"payload frame rejected: {e}") from e
    if len(payload) != size:
        raise ProtocolError(f"payload is {len(payload)} bytes, header announced {size}")
    return clean, payload


# -- values <-> (specs, payload) ---------------------------------------------------------------------------
def scalar_spec(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"kind": "scalar", "type": "bool", "value": v}
    if isinstance(v, int):
        if not -MAX_INT <= v <= MAX_INT:
            raise ValueError("integer output out of range")
        return {"kind": "scalar", "type": "int", "value": v}
    if isinstance(v, float):
        return {"kind": "scalar", "type": "float", "value": repr(v)}
    if v is None:
        return {"kind": "scalar", "type": "none", "value": None}
    if isinstance(v, str) and len(v) <= 1000:
        return {"kind": "scalar", "type": "str", "value": v}
    raise ValueError(f"value of type {type(v).__name__} cannot be compared")


def encode_values(values: list[Any]) -> tuple[list[dict[str, Any]], bytes]:
    """Plain CPU tensors and scalars -> (specs, concatenated raw bytes). Used by both sides."""
    import torch

    specs: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            t = v.detach().contiguous().reshape(-1)
            dtype = str(t.dtype).removeprefix("torch.")
            if dtype not in ITEMSIZE:
                raise ValueError(f"dtype {dtype} cannot be compared")
            data = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
            specs.append(
                {"kind": "tensor", "dtype": dtype, "shape": list(v.shape), "nbytes": len(data), "device": "cpu"}
            )
            chunks.append(data)
        else:
            specs.append(scalar_spec(v))
    return specs, b"".join(chunks)


def payload_size(calls: list[list[dict[str, Any]]]) -> int:
    return sum(s["nbytes"] for call in calls for s in call if s["kind"] == "tensor")


def decode_values(specs: list[dict[str, Any]], payload: bytes | memoryview, offset: int = 0) -> tuple[list[Any], int]:
    """Validated specs + payload -> values (CPU tensors are copies); returns the new offset."""
    import torch

    values: list[Any] = []
    for s in specs:
        if s["kind"] != "tensor":
            values.append(s["value"])
            continue
        n = s["nbytes"]
        if offset + n > len(payload):
            raise ProtocolError("payload shorter than its tensor specs")
        dtype = getattr(torch, s["dtype"])
        if n:
            raw = torch.frombuffer(bytearray(payload[offset : offset + n]), dtype=torch.uint8)
            values.append(raw.view(dtype).reshape(s["shape"]))
        else:
            values.append(torch.empty(s["shape"], dtype=dtype))
        offset += n
    return values, offset


def decode_calls(calls: list[list[dict[str, Any]]], payload: bytes) -> list[list[Any]]:
    """Every call's values from one payload; the payload must be consumed exactly."""
    out, offset = [], 0
    for specs in calls:
        values, offset = decode_values(specs, payload, offset)
        out.append(values)
    if offset != len(payload):
        raise ProtocolError(f"payload has {len(payload) - offset} bytes beyond its tensor specs")
    return out
