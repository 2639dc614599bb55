"""Issue 27, second red-team round on the CPU cost model. Each test was red on the code before its fix:
- a split-K matmul whose programs add partial tiles into C with a plain load + add + store earned the reward of the
  honest atomic version (1.23 on `ref_matmul_long_k.py`): the interpreter runs programs in turn, a GPU at once;
- an fp32 convolution reference was priced at the plain FP32 rate while cuDNN runs it in TF32 by default, so a TF32
  Triton convolution modelled a 1.8x speedup (reward 1.90 on `ref_conv3x3.py`) the GPU would not give."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

import drkernel.verify.process.interpreter_env  # noqa: F401  (before triton)
from drkernel.perfmodel import get_profile, model_time
from drkernel.perfmodel.aten_count import AtenCounter
from drkernel.perfmodel.triton_count import Race, TritonCounter
from drkernel.rl.rewards import score
from drkernel.verify import VerifyOptions
from drkernel.verify.engine import Verifier
from drkernel.verify.harness import problem

HERE = Path(__file__).parent
LONG_K = (HERE / "ref_matmul_long_k.py").read_text()
MODEL = VerifyOptions(device="cpu", timing="cpu_model", num_correct_trials=1, timeout_s=300, measure_coverage=False)


def _src(name: str) -> str:
    return (HERE / name).read_text()


@triton.jit
def chain_kernel(x, y, BLOCK: tl.constexpr):
    """Each program adds the block the previous program stored: a running sum in the interpreter, a race on a GPU."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + pid * BLOCK + offs)
    if pid > 0:
        v += tl.load(y + (pid - 1) * BLOCK + offs)
    tl.store(y + pid * BLOCK + offs, v)


def _splitk(name: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    module = problem.import_file(str(HERE / name), name.removesuffix(".py"))
    with torch.no_grad():
        return module.ModelNew()(a, b)


def test_a_launch_whose_programs_race_on_plain_stores_is_refused() -> None:
    a, b = torch.randn(64, 1024), torch.randn(1024, 64)
    with TritonCounter(), pytest.raises(Race, match="stored the same bytes without atomics"):
        _splitk("race_splitk_plain_store.py", a, b)
    x, y = torch.ones(4 * 16), torch.zeros(4 * 16)
    with TritonCounter(), pytest.raises(Race, match="loaded bytes another program stored"):
        chain_kernel[(4,)](x, y, BLOCK=16)
    with TritonCounter() as counter:  # the same work with atomic adds: counted, no race
        out = _splitk("honest_splitk_atomic.py", a, b)
    torch.testing.assert_close(out, a @ b, atol=1e-3, rtol=1e-3)
    assert len(counter.launches) == 1 and counter.launches[0].programs == 16


@pytest.mark.integration
def test_racy_split_k_earns_nothing_through_the_verifier() -> None:
    with Verifier(device="cpu", max_concurrency=1) as verifier:
        r = verifier.verify(LONG_K, _src("race_splitk_plain_store.py"), MODEL)
        assert r.status == "ok" and not r.correct and score(r) == 0.0, (r.status, r.correct, r.error)
        assert r.error is not None and "stored" in r.error.message
        honest = verifier.verify(LONG_K, _src("honest_splitk_atomic.py"), MODEL)
        assert honest.status == "ok" and honest.correct and score(honest) > 0.5, honest.error


def test_an_fp32_convolution_is_priced_at_the_tf32_rate_cudnn_runs_it_at() -> None:
    ref = problem.import_file(str(HERE / "ref_conv3x3.py"), "ref_conv3x3")
    model, (x,) = ref.Model(), ref.get_inputs()
    counter = AtenCounter()
    with torch.no_grad(), counter:
        model(x)
    convs = [c for c in counter.launches if "conv" in c.name]
    assert len(convs) == 1 and set(convs[0].flops) == {"tf32"}, counter.launches
    assert convs[0].flops["tf32"] == 2 * 4 * 128 * 128 * 9 * 32 * 32
    # a matmul of fp32 operands stays on the FP32 pipe (eager PyTorch leaves TF32 off for matmuls)
    mm = AtenCounter()
    with torch.no_grad(), mm:
        torch.randn(64, 64) @ torch.randn(64, 64)
    assert set(mm.launches[-1].flops) == {"fp32"}
    h200 = get_profile("h200")
    assert model_time(convs, h200).kernel_seconds < 2 * 4 * 128 * 128 * 9 * 32 * 32 / h200.fp32_flops / 2
