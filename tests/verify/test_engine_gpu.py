"""The CUDA path of the engine (events, L2 flush, launch hook, CUDA IPC, profiler coverage).

Runs only where a GPU exists; the same engine code is exercised on CPU by test_engine_basic.py.
"""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU", allow_module_level=True)

from drkernel.rl.rewards import score  # noqa: E402
from drkernel.verify import Verifier, VerifyOptions  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.integration]

REFERENCE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return torch.relu(a + b)

N = 1 << 24

def get_inputs():
    return [torch.randn(N), torch.randn(N)]

def get_init_inputs():
    return []
"""

KERNEL = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def add_relu_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)

def launch(a, b):
    out = torch.empty_like(a)
    add_relu_kernel[(triton.cdiv(a.numel(), 4096),)](a, b, out, a.numel(), BLOCK=4096)
    return out
"""

HONEST = (
    KERNEL
    + """
class ModelNew(nn.Module):
    def forward(self, a, b):
        return launch(a, b)
"""
)

# Stream created through getattr so the static gate misses it: the runtime checks must catch it.
SIDE_STREAM = (
    KERNEL
    + """
_make = getattr(torch.cuda, "Str" + "eam")
_ctx = getattr(torch.cuda, "str" + "eam")
_current = getattr(torch.cuda, "current_str" + "eam")

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = _make()

    def forward(self, a, b):
        self.s.wait_stream(_current())  # inputs are ready; the output is not awaited by the harness stream
        with _ctx(self.s):
            out = launch(a, b)
            for _ in range(20):
                out = launch(out, b * 0)
        return out
"""
)


@pytest.fixture(scope="module")
def verifier():
    with Verifier(device="cuda", max_concurrency=2) as v:
        yield v


def test_honest_kernel_on_cuda(verifier):
    r = verifier.verify(REFERENCE, HONEST, VerifyOptions(num_perf_trials=20))
    assert r.status == "ok", r.error
    assert r.correct and r.hack is None and r.timing_source == "host_roundtrip_cuda"
    assert r.runtime_ms > 0 and r.speedup > 0.5 and r.coverage > 0.9 and score(r) > 1.0
    assert r.details["coverage_source"] == "torch_profiler_cuda"
    print(r.model_dump_json(indent=1, exclude={"details": {"trials"}}))


def test_reference_against_itself_on_cuda(verifier):
    r = verifier.verify(REFERENCE, REFERENCE, VerifyOptions(require_triton=False, num_perf_trials=20))
    assert r.status == "ok" and r.correct and r.hack is None and 0.7 < r.speedup < 1.4
    assert r.coverage == 0.0


def test_side_stream_is_caught_on_cuda(verifier):
    """The gate rejects the computed getattr; without it, the launch hook's stream evidence holds."""
    r = verifier._verify_ungated(REFERENCE, SIDE_STREAM, VerifyOptions(num_perf_trials=10))
    assert r.status == "ok", r.error
    assert r.hack == "side_stream" and score(r) == 0, (r.error, r.details.get("trials"), r.details.get("traceback"))


HELPER = """
import triton
import triton.language as tl


@triton.jit
def add_relu_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)
"""

SAME_NAME_ELSEWHERE = (
    KERNEL
    + f"""
import os
import sys

with open(os.path.join(os.getcwd(), "library_kernels.py"), "w") as _f:
    _f.write({HELPER!r})
sys.path.insert(0, os.getcwd())
import library_kernels


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.empty_like(a)
        library_kernels.add_relu_kernel[(triton.cdiv(a.numel(), 4096),)](a, b, out, a.numel(), BLOCK=4096)
        launch(a[:16], b[:16])
        return out
"""
)


def test_same_named_kernel_gets_no_coverage_on_cuda(verifier):
    """Seen #10: device kernels named like the candidate's but launched from another file's JIT object."""
    r = verifier._verify_ungated(REFERENCE, SAME_NAME_ELSEWHERE, VerifyOptions(num_perf_trials=10))
    assert r.status == "ok" and r.correct, r.error
    assert r.coverage is not None and r.coverage < 0.2, r.coverage
    assert r.details.get("coverage_name_collisions") == ["add_relu_kernel"], r.details


def test_black_box_timing_details_on_cuda(verifier):
    r = verifier.verify(REFERENCE, HONEST, VerifyOptions(num_perf_trials=10))
    assert r.details["calls_per_round"] >= 1 and r.details["empty_round_trip_ms"] > 0
    assert r.details["isolation"]["preloaded"] == "yes"


def test_every_child_drops_root_and_a_spare_judges_like_a_fresh_group_on_cuda(verifier):
    """On a GPU the children of an evaluation share that evaluation's own uid (CUDA IPC needs one uid): none is
    root, the candidate cannot reach another evaluation's processes, and the judge's buffers still open in the
    runners. A spare group (started and warmed ahead) gives the honest kernel the same verdict."""
    assert verifier.spares == 2  # the CUDA default
    with Verifier(device="cuda", max_concurrency=1, spares=0) as v:
        fresh = v.verify(REFERENCE, HONEST, VerifyOptions(num_perf_trials=10))
    with Verifier(device="cuda", max_concurrency=1, spares=1) as v:
        assert v.warm_spares() == 1
        spare = v.verify(REFERENCE, HONEST, VerifyOptions(num_perf_trials=10))
    for r, children in ((fresh, "started for this evaluation"), (spare, "spare")):
        assert r.status == "ok" and r.correct and r.hack is None and score(r) > 1.0, r.error
        assert r.details["children"] == children
        uid = r.details["isolation"]["uid"]
        assert uid.startswith("active (uid=gid=") and "not dumpable" in uid, uid
