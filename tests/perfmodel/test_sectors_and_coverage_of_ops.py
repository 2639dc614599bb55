"""Issue 35: the CPU cost model prices what a GPU moves and refuses what it cannot price.
- Memory is counted in whole sectors (the profile's sector_bytes, 32 B on NVIDIA): a relu that loads and stores only
  the high 16 bits of each fp32 moved half the bytes in the model and none fewer sectors on a GPU.
- Every builder operation the interpreter can run is priced, routed to a priced one, known to be free, or refused;
  tl.histogram and pointer arithmetic were free.
- The fused attention operator eager PyTorch runs on CPU has a flop formula (it was priced by its bytes alone)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import sdpa_flop_count

from drkernel.config.verifier import VerifyOptions
from drkernel.perfmodel import get_profile
from drkernel.perfmodel.aten_count import AtenCounter
from drkernel.perfmodel.triton_count import FREE_OPS, ROUTED_OPS, Race, TritonCounter, Unsupported
from drkernel.verify.cost_model.replay import model_locally, priced

from . import kernels as k

RELU = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(512, 2048)]

def get_init_inputs():
    return []
"""
CANDIDATE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

{kernel}

class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        {launch}
        return out
"""
HONEST = CANDIDATE.format(
    kernel="""@triton.jit
def relu_kernel(x, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o + offs, tl.maximum(tl.load(x + offs, mask=m), 0.0), mask=m)""",
    launch="relu_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096)",
)
HALF = CANDIDATE.format(
    kernel="""@triton.jit
def relu_kernel(xh, oh, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    h = tl.load(xh + 2 * offs + 1, mask=m)
    tl.store(oh + 2 * offs + 1, tl.where(h < 0, 0, h).to(tl.int16), mask=m)""",
    launch="relu_kernel[(triton.cdiv(n, 4096),)](x.view(torch.int16), out.view(torch.int16), n, BLOCK=4096)",
)


def test_a_launch_that_touches_half_of_each_float_moves_every_sector() -> None:
    x = torch.randn(1024)
    out = torch.zeros(1024)
    with TritonCounter() as c:
        k.high_half_relu_kernel[(4,)](x.view(torch.int16), out.view(torch.int16), 1024, BLOCK=256)
    (got,) = c.launches
    torch.testing.assert_close(out, torch.relu(x), atol=1e-2, rtol=1e-2)  # bf16 precision passes the tolerance
    assert (got.read_bytes, got.write_bytes) == (4096, 4096)  # 2 KiB of each touched, 4 KiB of sectors
    with TritonCounter(sector_bytes=4) as c:  # at a 4-byte granularity the same accesses are half the bytes
        k.high_half_relu_kernel[(4,)](x.view(torch.int16), out.view(torch.int16), 1024, BLOCK=256)
    assert (c.launches[0].read_bytes, c.launches[0].write_bytes) == (4096, 4096)
    with TritonCounter(sector_bytes=2) as c:
        k.high_half_relu_kernel[(4,)](x.view(torch.int16), out.view(torch.int16), 1024, BLOCK=256)
    assert (c.launches[0].read_bytes, c.launches[0].write_bytes) == (2048, 2048)
    assert all(p.sector_bytes == 32 for p in (get_profile("h200"), get_profile("a100")))


def test_the_half_float_relu_models_no_faster_than_the_honest_one(tmp_path) -> None:
    opts = VerifyOptions(device="cpu", timing="cpu_model")
    honest = model_locally(RELU, HONEST, str(tmp_path / "honest"), opts)
    half = model_locally(RELU, HALF, str(tmp_path / "half"), opts)
    assert honest["verdict"] == half["verdict"] == "match", (honest["message"], half["message"])
    assert half["cand_s"] >= honest["cand_s"], (half["cand"], honest["cand"])  # it was half the time before


def test_histogram_and_pointer_arithmetic_are_priced() -> None:
    x, o = torch.randint(0, 8, (64,), dtype=torch.int32), torch.zeros(8, dtype=torch.int32)
    with TritonCounter() as c:
        k.histogram_kernel[(1,)](x, o, N=64, BINS=8)
    assert torch.equal(o, torch.bincount(x, minlength=8).int())
    assert c.launches[0].flops.get("vector", 0) >= 64
    x, o = torch.ones(16, dtype=torch.int32), torch.zeros(16, dtype=torch.int32)
    with TritonCounter() as c:
        k.pointer_walk_kernel[(1,)](x, o, STEPS=32, BLOCK=16)
    assert torch.equal(o, torch.full((16,), 32 * 4, dtype=torch.int32))  # 32 steps of one int32 each
    assert c.launches[0].flops["vector"] >= 32 * 16  # one pointer add per element per step


def test_operations_the_counter_cannot_price_are_refused() -> None:
    x, o = torch.ones(16), torch.zeros(16, dtype=torch.int32)
    with TritonCounter(), pytest.raises(Exception) as raised:  # the interpreter wraps it (InterpreterError)
        k.inline_asm_kernel[(1,)](x, o, BLOCK=16)
    assert isinstance(raised.value, Unsupported) or isinstance(raised.value.__cause__, Unsupported), raised.value
    assert "inline_asm is not counted" in str(raised.value)


def test_every_builder_operation_is_priced_routed_free_or_refused() -> None:
    from triton.runtime.interpreter import InterpreterBuilder

    names = {n for n in dir(InterpreterBuilder) if n.startswith("create_")}
    before = {n: getattr(InterpreterBuilder, n) for n in names}
    with TritonCounter():
        patched = {n for n in names if getattr(InterpreterBuilder, n) is not before[n]}
    assert names == patched | (FREE_OPS & names) | (ROUTED_OPS & names)
    assert not patched & (FREE_OPS | ROUTED_OPS)
    assert all(getattr(InterpreterBuilder, n) is before[n] for n in names)  # put back on exit


def test_cpu_attention_has_a_flop_formula_and_may_be_replayed() -> None:
    q, kk, v = torch.randn(2, 4, 16, 8), torch.randn(2, 4, 32, 8), torch.randn(2, 4, 32, 8)
    with torch.no_grad(), AtenCounter() as c:
        F.scaled_dot_product_attention(q, kk, v)
    (got,) = c.launches
    assert got.name == "aten::_scaled_dot_product_flash_attention_for_cpu"
    assert got.flops == {"fp32": float(sdpa_flop_count(q.shape, kk.shape, v.shape))}
    assert priced(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default)


def test_eager_operators_on_strided_views_move_whole_sectors() -> None:
    x = torch.randn(64, 256)
    with AtenCounter() as c:
        x.view(torch.int16)[:, 1::2].clone()  # the high halves of every float: every sector of x
        x[:, :4].clone()  # 16 B of each 1 KiB row: one sector a row
        x[:, ::8].clone()  # one float in every sector
        x.clone()
    high, column, sparse, whole = c.launches
    assert high.read_bytes == whole.read_bytes == 64 * 256 * 4
    assert column.read_bytes == 64 * 32
    assert sparse.read_bytes == 64 * 256 * 4


def test_tensor_descriptor_loads_and_stores_count_like_pointer_ones() -> None:
    """Red-team note N1: the catch-all refused tensor descriptors (Triton 3.9's only block-pointer style), which the
    interpreter runs through the counted masked load and store."""
    x = torch.randn(1000)
    counts = []
    for kernel in (k.descriptor_relu_kernel, k.pointer_relu_kernel):
        o = torch.empty(1000)
        with TritonCounter() as c:
            kernel[(8,)](x, o, 1000, BLOCK=128)
        torch.testing.assert_close(o, torch.relu(x))
        counts.append((c.launches[0].read_bytes, c.launches[0].write_bytes, c.launches[0].programs))
    assert counts[0] == counts[1] == (4000, 4000, 8), counts


def test_an_atomic_exchange_after_a_plain_load_is_a_race() -> None:
    """Red-team finding F8: a split-K written back with tl.atomic_xchg of a plainly loaded sum passed the race check
    (atomics were exempt); an accumulating atomic (atomic_add) still is."""
    x = torch.ones(4 * 16, dtype=torch.int32)
    y = torch.zeros(16, dtype=torch.int32)
    with TritonCounter(), pytest.raises(Exception) as raised:
        k.xchg_accumulate_kernel[(4,)](x, y, BLOCK=16)
    assert isinstance(raised.value.__cause__, Race) or isinstance(raised.value, Race), raised.value
    y = torch.zeros(16, dtype=torch.int32)
    with TritonCounter(), pytest.raises(Exception) as raised:  # F8b: one compare-and-swap, no retry
        k.cas_accumulate_kernel[(4,)](x, y, BLOCK=16)
    assert isinstance(raised.value.__cause__, Race) or isinstance(raised.value, Race), raised.value
    y = torch.zeros(16, dtype=torch.int32)
    with TritonCounter() as c:
        k.add_accumulate_kernel[(4,)](x, y, BLOCK=16)
    assert torch.equal(y, torch.full((16,), 4, dtype=torch.int32)) and c.launches[0].programs == 4


def test_cpu_lstm_cdist_and_bilinear_references_count_their_arithmetic() -> None:
    """Red-team note N3: oneDNN's LSTM layer, cdist's kernels and nn.Bilinear's _trilinear had no flop formula, so
    references through them were priced by their bytes alone (KernelBench's LSTMs at 66 us for ~30 GFLOP)."""
    lstm, bilinear = torch.nn.LSTM(8, 16), torch.nn.Bilinear(5, 6, 7)
    with torch.no_grad(), AtenCounter() as c:
        lstm(torch.randn(5, 3, 8))
        torch.cdist(torch.randn(4, 30, 8), torch.randn(4, 40, 8))
        bilinear(torch.randn(3, 5), torch.randn(3, 6))
    flops = {x.name: sum(x.flops.values()) for x in c.launches if x.flops}
    assert flops["aten::mkldnn_rnn_layer"] == 2 * 5 * 3 * (64 * 8 + 64 * 16)
    assert sum(v for name, v in flops.items() if "dist" in name) >= 2 * 4 * 30 * 40 * 8
    with torch.no_grad(), AtenCounter() as c:  # F9: a batch broadcast from the second operand counts in full
        torch.cdist(torch.randn(1, 30, 8), torch.randn(4, 40, 8), compute_mode="donot_use_mm_for_euclid_dist")
    assert sum(sum(x.flops.values()) for x in c.launches) >= 2 * 4 * 30 * 40 * 8, c.launches
    assert flops["aten::_trilinear"] == 2 * 3 * 7 * 5 * 6


@pytest.mark.parametrize(
    "op",
    [
        torch.ops.aten.hardswish.default,
        torch.ops.aten.max_pool3d_with_indices.default,
        torch.ops.aten.avg_pool3d.default,
        torch.ops.aten.upsample_nearest2d.vec,
        torch.ops.aten.glu.default,
        torch.ops.aten.mse_loss.default,
        torch.ops.aten.nll_loss_forward.default,
        torch.ops.aten.unsafe_split.Tensor,
    ],
)
def test_operators_linear_in_their_bytes_that_references_reach_are_priced(op) -> None:
    """Red-team note N4: a correct candidate that keeps torch's MaxPool3d or HardSwish beside its Triton kernels was
    refused ("no cost model") under cpu_model."""
    assert priced(op)
