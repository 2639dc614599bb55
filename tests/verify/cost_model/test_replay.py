"""The CPU cost model's replay (issue 13): what an honest trace models to, and every way a candidate could
try to get a high modelled speedup without doing the work. The trusted judgement (model_candidate) runs
in this process on traces recorded from real candidates in the interpreter; a tampered harness is
modelled by editing an honest trace. test_replay_engine.py runs the same through the Verifier."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import triton.language as tl

import drkernel.verify.process.interpreter_env  # noqa: F401  (before triton)
from drkernel.config.verifier import VerifyOptions
from drkernel.verify.cost_model.replay import ReplayFailed, load_kernels, model_candidate, rebuild_source, trace_locally
from drkernel.verify.process import protocol
from drkernel.verify.static.gate import check_source

ROOT = Path(__file__).resolve().parents[3]
VECTOR_REF = (ROOT / "examples" / "vector_add" / "reference.py").read_text()
VECTOR_CAND = (ROOT / "examples" / "vector_add" / "candidate.py").read_text()
OPTS = VerifyOptions(gpu_profile="h200", atol=1e-2, rtol=1e-2, correctness="strict")

HEAD = """
import torch
import torch.nn as nn
import triton
import triton.language as tl
"""

SUM_REF = (
    HEAD
    + """
class Model(nn.Module):
    def forward(self, x):
        return x.sum(0, keepdim=True)

def get_inputs():
    return [torch.randn(256)]

def get_init_inputs():
    return []
"""
)

CHAIN_REF = (
    HEAD
    + """
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x * 2.0 + 1.0)

def get_inputs():
    return [torch.randn(4096)]

def get_init_inputs():
    return []
"""
)

CHAIN_FUSED = (
    HEAD
    + """
@triton.jit
def chain_kernel(x, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o + offs, tl.maximum(tl.load(x + offs, mask=m) * 2.0 + 1.0, 0.0), mask=m)

class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        chain_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
"""
)

# A Triton kernel for the last step, eager torch for the rest: aten operators in the trace are replayed too.
CHAIN_MIXED = (
    HEAD
    + """
@triton.jit
def relu_kernel(x, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o + offs, tl.maximum(tl.load(x + offs, mask=m), 0.0), mask=m)

class ModelNew(nn.Module):
    def forward(self, x):
        y = x * 2.0 + 1.0
        out = torch.empty_like(y)
        relu_kernel[(triton.cdiv(y.numel(), 1024),)](y, out, y.numel(), BLOCK=1024)
        return out
"""
)

HOST_SCALAR = (
    HEAD
    + """
@triton.jit
def fill_kernel(out_ptr, value):
    tl.store(out_ptr, value)

class ModelNew(nn.Module):
    def forward(self, x):
        total = sum(x.tolist())
        out = torch.empty(1, dtype=x.dtype)
        fill_kernel[(1,)](out, total)
        return out
"""
)

HOST_CONSTEXPR = (
    HOST_SCALAR.replace("def fill_kernel(out_ptr, value):", "def fill_kernel(out_ptr, VALUE: tl.constexpr):")
    .replace("tl.store(out_ptr, value)", "tl.store(out_ptr, VALUE)")
    .replace("(out, total)", "(out, VALUE=total)")
)

NUMPY_HOST = (
    HEAD
    + """
@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)

class ModelNew(nn.Module):
    def forward(self, a, b):
        done = torch.from_numpy(a.numpy() + b.numpy())
        out = torch.empty_like(a)
        copy_kernel[(triton.cdiv(a.numel(), 1024),)](done, out, a.numel(), BLOCK=1024)
        return out
"""
)

POINTER_REACH = (
    HEAD
    + """
@triton.jit
def add_from_one_kernel(a_ptr, out_ptr, n, delta, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=m) + tl.load(a_ptr + delta + offs, mask=m), mask=m)

class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.empty_like(a)
        delta = (b.data_ptr() - a.data_ptr()) // 4
        add_from_one_kernel[(triton.cdiv(a.numel(), 1024),)](a, out, a.numel(), delta, BLOCK=1024)
        return out
"""
)


@pytest.fixture(scope="module")
def vector(tmp_path_factory):
    return trace_locally(VECTOR_REF, VECTOR_CAND, str(tmp_path_factory.mktemp("vector")))


def _judge(parts: dict, **changes) -> dict:
    return model_candidate(**{**parts, **changes}, options=OPTS)


def test_honest_trace_replays_and_is_modelled(vector):
    m = _judge(vector)
    assert m["verdict"] == "match", m["message"]
    assert m["cand"]["launches"] == 1 and m["cand"]["read_bytes"] == 2 * 4096 * 4
    # one pass each way: the same bytes, one launch (its 4 programs' arithmetic on 4 of 132 SMs takes a few ns more)
    assert m["cand_s"] == pytest.approx(m["ref_s"], rel=1e-3)
    # ops: offsets, mask, the add and three pointer offsets for each of 4096 elements, pid * BLOCK once per program
    assert m["launches"] == ["triton add_kernel: read 32768 B, wrote 16384 B, re-read 0 B, 2.458e+04 flop"]
    protocol.validate(m)  # the reply the judge reads is well formed


@pytest.mark.parametrize("candidate, faster", [(CHAIN_FUSED, True), (CHAIN_MIXED, False)])
def test_fused_and_mixed_candidates_model_against_the_unfused_reference(tmp_path, candidate, faster):
    m = model_candidate(**trace_locally(CHAIN_REF, candidate, str(tmp_path)), options=OPTS)
    assert m["verdict"] == "match", m["message"]
    assert m["ref"]["launches"] == 3
    assert (m["cand_s"] < m["ref_s"]) is faster


def test_mixed_candidate_is_charged_for_its_aten_operators(tmp_path):
    fused = model_candidate(**trace_locally(CHAIN_REF, CHAIN_FUSED, str(tmp_path / "a")), options=OPTS)
    mixed = model_candidate(**trace_locally(CHAIN_REF, CHAIN_MIXED, str(tmp_path / "b")), options=OPTS)
    assert mixed["cand"]["launches"] == 3 and fused["cand"]["launches"] == 1
    assert mixed["cand_s"] > fused["cand_s"]


# -- attacks: a high modelled speedup without doing the work ----------------------------------------------
def test_trace_that_omits_the_launch_fails(vector):
    trace = copy.deepcopy(vector["trace"])
    trace["events"] = [e for e in trace["events"] if e["op"] != "launch"]
    m = _judge(vector, trace=trace)
    assert m["verdict"] == "mismatch" and "never saw" in m["message"]


def test_trace_that_runs_part_of_the_grid_fails(vector):
    trace = copy.deepcopy(vector["trace"])
    launch = next(e for e in trace["events"] if e["op"] == "launch")
    launch["grid"] = [launch["grid"][0] // 2, 1, 1]
    assert _judge(vector, trace=trace)["verdict"] == "mismatch"


@pytest.mark.parametrize("source", [HOST_SCALAR, HOST_CONSTEXPR])
def test_work_done_on_the_host_and_passed_as_a_literal_fails(tmp_path, source):
    """sum(x.tolist()) is invisible to the dispatcher; its value reaches the kernel as a scalar or constexpr,
    right for the inputs the trace was recorded on and wrong for the replay's."""
    assert check_source(source).passed  # the gate lets it through: only the replay catches it
    m = model_candidate(**trace_locally(SUM_REF, source, str(tmp_path)), options=OPTS)
    assert m["verdict"] == "mismatch" and "never saw" in m["message"]


def test_work_done_in_numpy_is_a_literal_and_fails(tmp_path):
    """torch.from_numpy hands the result in as host data: a literal, right only for the traced inputs."""
    assert check_source(NUMPY_HOST).passed
    m = model_candidate(**trace_locally(VECTOR_REF, NUMPY_HOST, str(tmp_path)), options=OPTS)
    assert m["verdict"] == "mismatch" and "never saw" in m["message"]


def test_tensor_from_outside_the_forward_cannot_be_traced():
    import torch

    from drkernel.verify.cost_model.trace import TraceError, TraceRecorder

    hidden = torch.randn(4)  # neither an input, committed state, nor made in the forward
    recorder = TraceRecorder([torch.randn(4)], {})
    with recorder, pytest.raises(TraceError, match="neither an input"):
        recorder.ref(hidden)


def test_reading_outside_the_reported_buffers_fails(tmp_path):
    assert check_source(POINTER_REACH).passed
    m = model_candidate(**trace_locally(VECTOR_REF, POINTER_REACH, str(tmp_path)), options=OPTS)
    assert m["verdict"] == "mismatch" and "outside the buffers" in m["message"]


def test_output_claimed_to_be_an_input_fails(vector):
    trace = copy.deepcopy(vector["trace"])
    trace["outputs"][0]["buf"] = 0  # "the answer is already in input 0"
    assert _judge(vector, trace=trace)["verdict"] == "mismatch"


def test_state_bytes_not_committed_at_load_fail(vector):
    """The answer smuggled in as "state": its digest was not committed before the inputs existed."""
    trace = copy.deepcopy(vector["trace"])
    out_buf = trace["outputs"][0]["buf"]
    nbytes = trace["buffers"][out_buf]["nbytes"]
    trace["buffers"][out_buf] = {"kind": "state", "nbytes": nbytes}
    trace["events"] = [e for e in trace["events"] if e["op"] != "alloc" and e["op"] != "launch"]
    answer = (vector["ref_out"][0]).numpy().tobytes()
    m = _judge(vector, trace=trace, payload=answer)
    assert m["verdict"] == "mismatch" and "not committed" in m["message"]
    m = _judge(vector, trace=trace, payload=answer, committed=["0" * 64])
    assert m["verdict"] == "mismatch"


def test_launch_of_something_that_is_not_a_gated_kernel_fails(vector):
    trace = copy.deepcopy(vector["trace"])
    next(e for e in trace["events"] if e["op"] == "launch")["kernel"] = "ModelNew"
    m = _judge(vector, trace=trace)
    assert m["verdict"] == "mismatch" and "not one of the candidate's gated jit functions" in m["message"]


def test_output_from_uninitialised_memory_fails(vector):
    """torch.empty in the replay could hand back the block the reference's output was freed from."""
    trace = copy.deepcopy(vector["trace"])
    out = trace["outputs"][0]
    trace["events"] = [
        {
            "op": "aten",
            "name": "aten::empty.memory_format",
            "args": [{"list": [4096]}],
            "kwargs": {"dtype": {"dtype": "float32"}},
            "outs": [out],
        }
    ]
    m = _judge(vector, trace=trace)
    assert m["verdict"] == "mismatch" and "not replayed" in m["message"]


def test_denied_and_unknown_aten_operators_fail(vector):
    for name in ("aten::from_file", "aten::no_such_op", "aten::resize_"):
        trace = copy.deepcopy(vector["trace"])
        trace["events"].insert(0, {"op": "aten", "name": name, "args": [], "kwargs": {}, "outs": []})
        assert _judge(vector, trace=trace)["verdict"] == "mismatch", name


def test_view_past_the_end_of_a_buffer_fails(vector):
    trace = copy.deepcopy(vector["trace"])
    trace["outputs"][0]["offset"] = 1
    m = _judge(vector, trace=trace)
    assert m["verdict"] == "mismatch" and "past the end" in m["message"]


def test_trace_schema_rejects_malformed_events():
    bad = [
        {
            "type": "trace",
            "buffers": [],
            "events": [{"op": "launch", "kernel": "k; import os", "grid": [1, 1, 1], "args": {}}],
            "outputs": [],
        },
        {
            "type": "trace",
            "buffers": [],
            "events": [{"op": "aten", "name": "os.system", "args": [], "kwargs": {}, "outs": []}],
            "outputs": [],
        },
        {"type": "trace", "buffers": [{"kind": "pickle"}], "events": [], "outputs": []},
        {
            "type": "trace",
            "buffers": [],
            "events": [
                {"op": "launch", "kernel": "k", "grid": [1, 1, 1], "args": {"x": {"t": {"buf": 0}, "extra": 1}}}
            ],
            "outputs": [],
        },
    ]
    for header in bad:
        with pytest.raises(protocol.ProtocolError):
            protocol.validate(header)


def test_rebuilt_module_holds_only_jit_functions_and_is_regated(tmp_path):
    source = (
        HEAD
        + """
import math
SCALE = 2.0

@triton.autotune(configs=[triton.Config({'BLOCK': 128})], key=['n'])
@triton.jit
def k(x, n, BLOCK: tl.constexpr):
    pass

def helper():
    return 1

class ModelNew(nn.Module):
    pass
"""
    )
    text, kernels = rebuild_source(source)
    assert kernels == ["k"] and "autotune" not in text and "helper" not in text and "ModelNew" not in text
    assert "import" not in text and "SCALE" not in text and text.startswith("def k(x, n, BLOCK: constexpr):")
    module, names = load_kernels(source, str(tmp_path))
    assert names == {"k": {"BLOCK"}} and module.SCALE == 2.0 and "constexpr" not in vars(module)
    assert module.tl is tl and "math" in vars(module)
    assert set(module.__builtins__) == {"len", "list", "range", "float", "int", "isinstance", "min", "max"}
    with pytest.raises(ReplayFailed, match="does not pass the gate"):
        load_kernels(source + "\nimport os\n", str(tmp_path))


REUSE = (
    HEAD
    + """
@triton.jit
def relu_kernel(x, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o + offs, tl.maximum(tl.load(x + offs, mask=m), 0.0), mask=m)

class ModelNew(nn.Module):
    def forward(self, x):
        a = x * 4.0
        b = a * 0.5
        del a
        c = b + 1.0
        out = torch.empty_like(c)
        relu_kernel[(triton.cdiv(c.numel(), 1024),)](c, out, c.numel(), BLOCK=1024)
        return out
"""
)


def test_freed_intermediates_do_not_alias_later_tensors(tmp_path):
    """`a` is freed before `c` is made: the allocator hands c a's address, and c must still be a new buffer."""
    m = model_candidate(**trace_locally(CHAIN_REF, REUSE, str(tmp_path)), options=OPTS)
    assert m["verdict"] == "match", m["message"]
    assert m["cand"]["launches"] == 4 and m["ref"]["launches"] == 3


def test_shipped_solution_with_eager_temporaries_replays(tmp_path):
    task = ROOT / "drkernel" / "tasks" / "library" / "gelu_tanh"
    m = model_candidate(
        **trace_locally((task / "reference.py").read_text(), (task / "solution_simple.py").read_text(), str(tmp_path)),
        options=OPTS,
    )
    assert m["verdict"] == "match", m["message"]
    assert m["cand"]["launches"] > m["ref"]["launches"] and m["cand_s"] > m["ref_s"]


MATMUL_REF = (
    HEAD
    + """
class Model(nn.Module):
    def forward(self, a, b):
        return a @ b

def get_inputs():
    return [torch.randn(16, 8), torch.randn(8, 16)]

def get_init_inputs():
    return []
"""
)

# The products through cdist (|a|^2 + |b|^2 - d^2 = 2 a.b): an operator with no flop formula would be priced
# by its bytes alone, far below the matmul it hides; cdist has one since issue 35 (red-team note N3), at least the
# matmul's arithmetic.
CDIST_MATMUL = (
    HEAD
    + """
@triton.jit
def half_kernel(x, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o + offs, tl.load(x + offs, mask=m) * 0.5, mask=m)

class ModelNew(nn.Module):
    def forward(self, a, b):
        d = torch.cdist(a, b.t().contiguous())
        s = (a * a).sum(1, keepdim=True) + (b * b).sum(0, keepdim=True) - d * d
        out = torch.empty_like(s)
        half_kernel[(triton.cdiv(s.numel(), 1024),)](s, out, s.numel(), BLOCK=1024)
        return out
"""
)


def test_work_hidden_in_an_operator_is_priced_at_least_as_the_matmul_it_replaces(tmp_path):
    assert check_source(CDIST_MATMUL).passed
    m = model_candidate(**trace_locally(MATMUL_REF, CDIST_MATMUL, str(tmp_path)), options=OPTS)
    assert m["verdict"] == "match", m["message"]
    (cdist,) = [line for line in m["launches"] if "cdist" in line]
    assert float(cdist.rsplit(", ", 1)[1].split()[0]) >= 2 * 16 * 16 * 8  # the matmul's flops
    assert m["cand_s"] > m["ref_s"]


CONST_CHAIN = (
    HEAD
    + """
@triton.jit
def affine_relu_kernel(x, ab, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(ab)
    b = tl.load(ab + 1)
    tl.store(o + offs, tl.maximum(tl.load(x + offs, mask=m) * a + b, 0.0), mask=m)

class ModelNew(nn.Module):
    def forward(self, x):
        ab = torch.tensor([2.0, 1.0])
        out = torch.empty_like(x)
        affine_relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, ab, out, x.numel(), BLOCK=1024)
        return out
"""
)

# The answer computed on the host and handed over as a literal tensor (torch.tensor of a Python list).
HOST_LITERAL_TENSOR = (
    HEAD
    + """
@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)

class ModelNew(nn.Module):
    def forward(self, x):
        done = torch.tensor([sum(x.tolist())], dtype=x.dtype)
        out = torch.empty(1, dtype=x.dtype)
        copy_kernel[(1,)](done, out, 1, BLOCK=16)
        return out
"""
)


def test_constant_tensor_made_in_the_forward_is_a_literal(tmp_path):
    m = model_candidate(**trace_locally(CHAIN_REF, CONST_CHAIN, str(tmp_path)), options=OPTS)
    assert m["verdict"] == "match", m["message"]
    assert m["cand"]["launches"] == 1 and m["cand_s"] < m["ref_s"]


def test_answer_handed_over_as_a_literal_tensor_fails(tmp_path):
    assert check_source(HOST_LITERAL_TENSOR).passed
    m = model_candidate(**trace_locally(SUM_REF, HOST_LITERAL_TENSOR, str(tmp_path)), options=OPTS)
    assert m["verdict"] == "mismatch" and "never saw" in m["message"]


# -- issue 27: the dot's operand precision, complex arithmetic, conj / neg bits ---------------------------------
REDTEAM = Path(__file__).resolve().parents[1] / "redteam"
LONG_K_REF = (REDTEAM / "ref_matmul_long_k.py").read_text()


def test_dot_is_replayed_with_the_operands_it_is_priced_at(tmp_path):
    """Red-team findings: Triton's default dot on fp32 (TF32 on a GPU) replayed exactly and was priced at the TF32
    rate, and so was a dot of tiles cast to fp64. Replayed with TF32 operands, the default dot misses the tolerance
    on a 1024-long sum as it does on an H200; exact fp32 ("ieee") and 3xTF32 match and are priced at their own rates
    (67 and 495/3 TFLOP/s on the H200)."""
    got = {
        name: model_candidate(
            **trace_locally(LONG_K_REF, (REDTEAM / f"{name}.py").read_text(), str(tmp_path / name)), options=OPTS
        )
        for name in ("cpu_model_tf32_dot", "honest_ieee_dot", "honest_tf32x3_dot", "cpu_model_fp64_dot")
    }
    tf32, ieee, x3, fp64 = got.values()
    assert tf32["verdict"] == "mismatch" and "values differ" in tf32["message"]
    assert ieee["verdict"] == x3["verdict"] == "match", (ieee["message"], x3["message"])
    assert ieee["cand"]["launches"] == x3["cand"]["launches"] == 1
    assert ieee["cand_s"] > x3["cand_s"]  # same kernel, same bytes: only the dot's rate differs
    # tiles cast to fp64: exact, and run on the FP64 units (67 TFLOP/s on the H200, as fp32), not at the TF32 rate
    assert fp64["verdict"] == "match" and fp64["cand_s"] >= ieee["cand_s"]


CONJ_MATMUL = (
    HEAD
    + """
@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)

class ModelNew(nn.Module):
    def forward(self, a, b):
        ia = torch.view_as_complex(torch.stack((torch.zeros_like(a), a), -1))  # i a
        ib = torch.view_as_complex(torch.stack((torch.zeros_like(b), b), -1))  # i b
        c = torch.mm(ia.conj(), ib).real.contiguous()  # (-i a)(i b) = a b: mm resolves the conj bit itself
        out = torch.empty_like(c)
        copy_kernel[(triton.cdiv(c.numel(), 1024),)](c, out, c.numel(), BLOCK=1024)
        return out
"""
)

NEG_CHAIN = (
    HEAD
    + """
@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)

class ModelNew(nn.Module):
    def forward(self, x):
        z = torch.view_as_complex(torch.stack((x, -x), -1))  # x - i x
        y = z.conj().imag * 2.0  # imag of a conjugate view is a negated view (neg bit) of -x: 2x
        y = torch.relu(y + 1.0)
        out = torch.empty_like(y)
        copy_kernel[(triton.cdiv(y.numel(), 1024),)](y, out, y.numel(), BLOCK=1024)
        return out
"""
)


def _tensor_args(event: dict) -> list[dict]:
    args = event["args"] if event["op"] == "aten" else []
    return [a["t"] for a in args if isinstance(a, dict) and "t" in a]


@pytest.mark.parametrize(("reference", "candidate"), [(MATMUL_REF, CONJ_MATMUL), (CHAIN_REF, NEG_CHAIN)])
def test_lazy_conjugate_and_negated_views_replay_as_they_ran(tmp_path, reference, candidate):
    """Operators resolve torch's conj and neg bits themselves; the trace carries them, so the replay runs the
    forward's arithmetic (without them it replayed (i a)(i b) = -ab and x * 2 = -2x: an honest forward failed)."""
    parts = trace_locally(reference, candidate, str(tmp_path))
    assert any(r.get("conj") or r.get("neg") for e in parts["trace"]["events"] for r in _tensor_args(e))
    m = model_candidate(**parts, options=OPTS)
    assert m["verdict"] == "match", m["message"]
    flipped = copy.deepcopy(parts["trace"])  # the same trace with the bits dropped replays other arithmetic
    for e in flipped["events"]:
        for r in _tensor_args(e):
            r.pop("conj", None), r.pop("neg", None)
    assert model_candidate(**{**parts, "trace": flipped}, options=OPTS)["verdict"] == "mismatch"
    bad = copy.deepcopy(parts["trace"])
    bad["events"][-1]["args"]["src"]["t"]["conj"] = True  # a conjugate view of a real tensor
    assert protocol.validate({"type": "trace", **bad})["events"][-1]["args"]["src"]["t"]["conj"] is True
    m = model_candidate(**{**parts, "trace": bad}, options=OPTS)
    assert m["verdict"] == "mismatch" and "conjugate view of a real tensor" in m["message"]
