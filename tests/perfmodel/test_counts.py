"""Hand-computed bytes, flops and launches for small real kernels (interpreter) and their eager references."""

import dataclasses

import pytest
import torch

from drkernel.perfmodel import PROFILES, LaunchCount, get_profile, launch_seconds, model_time
from drkernel.perfmodel.aten_count import AtenCounter
from drkernel.perfmodel.triton_count import OutsideBuffers, TritonCounter

from . import kernels as k

H200 = get_profile("h200")


def _one(counter: TritonCounter) -> LaunchCount:
    assert len(counter.launches) == 1
    return counter.launches[0]


def test_elementwise_kernel_counts_each_byte_once():
    a, b, o = torch.randn(1000), torch.randn(1000), torch.empty(1000)
    with TritonCounter() as c:
        k.add_kernel[(8,)](a, b, o, 1000, BLOCK=128)  # 1024 lanes, 24 masked off
    got = _one(c)
    assert (got.name, got.kind, got.read_bytes, got.write_bytes, got.reread_bytes, got.flops) == (
        "add_kernel",
        "triton",
        8000,
        4000,
        0,
        {"vector": 8 * (1 + 128 + 128 + 128 + 3 * 128)},
    )  # per program: pid * BLOCK, + arange, < n, the fadd, three pointer offsets; masked-off lanes still execute
    assert got.programs == 8
    assert launch_seconds(got, H200) == pytest.approx(12000 / 4.3e12 + 4e-6)  # memory-bound: 3080 ops are nothing
    with AtenCounter() as ref:
        torch.add(a, b)
    assert [(x.name, x.read_bytes, x.write_bytes) for x in ref.launches] == [("aten::add.Tensor", 8000, 4000)]


def test_reduction_kernel_and_its_reference():
    x, o = torch.randn(4, 256), torch.empty(4)
    with TritonCounter() as c:
        k.row_sum_kernel[(4,)](x, o, 256, BLOCK=256)
    got = _one(c)
    assert (got.read_bytes, got.write_bytes, got.reread_bytes) == (4096, 32, 0)  # 16 B written: one 32 B sector
    torch.testing.assert_close(o, x.sum(1))
    with AtenCounter() as ref:
        x.sum(1)
    assert [(r.name, r.read_bytes, r.write_bytes) for r in ref.launches] == [("aten::sum.dim_IntList", 4096, 32)]


def test_tiled_matmul_counts_rereads_and_dot_flops():
    a, b, c = torch.randn(32, 32), torch.randn(32, 32), torch.empty(32, 32)
    with TritonCounter() as cnt:
        k.matmul_kernel[(2, 2)](a, b, c, 32, 32, 32, BM=16, BN=16, BK=16)
    got = _one(cnt)
    # 4 programs each load a 16x32 strip of A and a 32x16 strip of B: 16 KiB loaded, 8 KiB distinct; every
    # re-read is of a strip another program loaded (L2), none within a program.
    assert (got.read_bytes, got.write_bytes, got.reread_bytes, got.local_reread_bytes) == (8192, 4096, 8192, 0)
    # fp32 tl.dot defaults to TF32. Per program: pm * BM and pn * BN (1 each), rm and rn (16 each), per k step
    # k + rk twice (16 each), rm[:, None] * K and (k + rk)[:, None] * N (16 each), `acc +=` (16x16); the store's
    # rm[:, None] * N (16); pointer offsets, ptr + rows (16) then + columns (16x16), twice a step and once to store.
    per_program = 2 * 1 + 2 * 16 + 2 * (2 * 16 + 2 * 16 + 16 * 16) + 16 + (2 * 2 + 1) * (16 + 16 * 16)
    assert got.flops == {"tf32": 2.0 * 32**3, "vector": 4 * per_program} and got.programs == 4
    torch.testing.assert_close(c, a @ b, atol=1e-3, rtol=1e-3)
    with AtenCounter() as ref:
        torch.mm(a, b)
    (r,) = ref.launches
    assert (r.name, r.read_bytes, r.write_bytes, r.flops) == ("aten::mm", 8192, 4096, {"fp32": 2.0 * 32**3})
    big = LaunchCount("mm", "triton", 0, 0, 0, {"tf32": 495e12})
    assert launch_seconds(big, H200) == pytest.approx(1.0 + 4e-6)  # compute-bound: flops / peak


def test_fused_chain_models_faster_than_unfused_reference():
    x, o = torch.randn(1 << 16), torch.empty(1 << 16)
    with TritonCounter() as c:
        k.fused_chain_kernel[(64,)](x, o, x.numel(), BLOCK=1024)
    with AtenCounter() as ref:
        expect = torch.relu(x * 2.0 + 1.0)
    torch.testing.assert_close(o, expect)
    assert [r.name for r in ref.launches] == ["aten::mul.Tensor", "aten::add.Tensor", "aten::relu"]
    assert sum(r.read_bytes + r.write_bytes for r in ref.launches) == 3 * 2 * x.numel() * 4
    fused, unfused = model_time(c.launches, H200), model_time(ref.launches, H200)
    assert fused.read_bytes + fused.write_bytes == 2 * x.numel() * 4
    assert fused.seconds < unfused.seconds / 2.5


def test_reading_input_twice_models_slower_than_once():
    a, b = torch.randn(1 << 16), torch.randn(1 << 16)
    o1, o2 = torch.empty_like(a), torch.empty_like(a)
    with TritonCounter() as twice:
        k.add_twice_kernel[(64,)](a, b, o1, a.numel(), BLOCK=1024)
    with TritonCounter() as once:
        k.add_once_kernel[(64,)](a, b, o2, a.numel(), BLOCK=1024)
    torch.testing.assert_close(o1, o2)
    # the second load of a is the same program's: an L1 re-read, not DRAM traffic and not an L2 one
    assert (_one(twice).local_reread_bytes, _one(twice).reread_bytes, _one(once).local_reread_bytes) == (
        a.numel() * 4,
        0,
        0,
    )
    assert _one(twice).read_bytes == _one(once).read_bytes
    assert model_time(twice.launches, H200).seconds > model_time(once.launches, H200).seconds


def test_views_and_allocations_launch_nothing_in_the_reference():
    x = torch.randn(8, 16)
    with AtenCounter() as ref:
        y = x.t().reshape(128)  # a copy (flattening a transposed view): one launch
        torch.empty_like(x)
        x.view(128)
    assert [r.name for r in ref.launches] == ["aten::clone"]
    assert y.shape == (128,)


def test_access_outside_allowed_buffers_is_refused_before_it_happens():
    a, b, o = torch.randn(256), torch.randn(256), torch.empty(256)
    allowed = [(t.data_ptr(), t.data_ptr() + 1024) for t in (a, o)]  # b not reported
    with TritonCounter(allowed=allowed), pytest.raises(Exception) as err:
        k.add_kernel[(2,)](a, b, o, 256, BLOCK=128)
    chain, e = [], err.value
    while e is not None:
        chain.append(type(e))
        e = e.__cause__ or e.__context__
    assert OutsideBuffers in chain
    with TritonCounter(allowed=allowed + [(b.data_ptr(), b.data_ptr() + 1024)]) as c:
        k.add_kernel[(2,)](a, b, o, 256, BLOCK=128)
    assert _one(c).read_bytes == 2048


def test_profiles_name_a_source_for_every_number():
    assert set(PROFILES) == {"h200", "a100", "ascend910b"}
    for p in PROFILES.values():
        numbers = {f for f in vars(p) if f not in ("name", "sources")}
        assert numbers <= set(p.sources), p.name
    assert "measured" in H200.sources["dram_bytes_per_s"] and "measured" in H200.sources["bf16_flops"]
    with pytest.raises(ValueError):
        get_profile("h100")


def test_bytes_are_counted_whatever_width_touched_them_first():
    """Red-team finding: an address once counted at the size of its first access, so a one-byte touch before
    each four-byte load and store made the launch look a quarter of its size."""
    x, o = torch.randn(1000), torch.empty(1000)
    with TritonCounter() as c:
        k.byte_first_copy_kernel[(8,)](x.view(torch.uint8), o.view(torch.uint8), x, o, 1000, BLOCK=128)
    got = _one(c)
    torch.testing.assert_close(o, x)
    assert (got.read_bytes, got.write_bytes, got.reread_bytes) == (4000, 4000, 0)
    # the one-byte loads touch every 32 B sector the float loads then read again (a GPU moves whole sectors): L1
    assert got.local_reread_bytes == 4000


def test_dot_scaled_is_priced_like_a_dot():
    """Red-team finding: tl.dot_scaled ran a real matmul in the interpreter that the counter did not see."""
    a, b = torch.randn(16, 32).bfloat16(), torch.randn(32, 16).bfloat16()
    c = torch.empty(16, 16)
    with TritonCounter() as cnt:
        k.dot_scaled_kernel[(1,)](a, b, c, M=16, N=16, K=32)
    assert _one(cnt).flops["bf16"] == 2.0 * 16 * 16 * 32


def test_integer_work_and_reductions_are_counted():
    """Red-team finding: integer ops and tl.sum were free, so a matmul as integer products plus a sum was priced
    as memory only."""
    a, b, o = torch.arange(64.0), torch.ones(64), torch.empty(1)
    with TritonCounter() as c:
        k.int_products_sum_kernel[(1,)](a, b, o, K=64)
    assert o.item() == sum(range(64))
    # two casts to int32 (64 each), the products (64), the sum (64 combines), the cast back (1), two pointer offsets
    assert _one(c).flops == {"vector": 64 * 4 + 1 + 2 * 64}


def test_one_program_computes_on_one_sm_and_its_large_rereads_go_to_l2():
    """Red-team finding: a single program looping over all the work had its arithmetic priced at full-device rates
    and its re-reads of a working set far beyond L1 at the L1 rate."""
    small, big = torch.randn(1024), torch.randn(128 * 1024)  # 4 KiB fits L1; 512 KiB does not
    o = torch.empty(1024)
    with TritonCounter() as c:
        k.reread_pass_kernel[(1,)](small, o, small.numel(), passes=2, BLOCK=1024)
        k.reread_pass_kernel[(1,)](big, o, big.numel(), passes=2, BLOCK=1024)
    fits, spills = c.launches
    assert (fits.read_bytes, fits.reread_bytes, fits.local_reread_bytes, fits.programs) == (4096, 0, 4096, 1)
    assert (spills.read_bytes, spills.reread_bytes, spills.local_reread_bytes) == (512 * 1024, 512 * 1024, 0)
    matmul = dataclasses.replace(fits, flops={"tf32": 2.0 * 1024**3}, programs=1)  # compute-bound on one SM
    spread = dataclasses.replace(matmul, programs=None)  # the same work over the whole device
    overhead = H200.launch_overhead_s
    assert launch_seconds(matmul, H200) - overhead == pytest.approx(132 * 2.0 * 1024**3 / 495e12)
    assert launch_seconds(spread, H200) - overhead == pytest.approx(2.0 * 1024**3 / 495e12)


def test_fp64_dot_is_priced_at_the_fp64_rate():
    """Red-team finding (issue 27): an fp64 tl.dot, exact on any device, was priced at the TF32 rate."""
    a, b, c = torch.randn(16, 16), torch.randn(16, 16), torch.empty(16, 16)
    with TritonCounter() as cnt:
        k.fp64_dot_kernel[(1,)](a, b, c, N=16)
    got = _one(cnt)
    torch.testing.assert_close(c, a @ b)
    assert got.flops["fp64"] == 2.0 * 16**3 and "tf32" not in got.flops
    work = dataclasses.replace(got, flops={"fp64": 67e12}, programs=None)
    assert launch_seconds(work, H200) == pytest.approx(1.0 + 4e-6)


@pytest.mark.parametrize(
    ("dtype", "precision", "per_mac"),
    [
        (torch.complex64, "fp32", 8),
        (torch.complex128, "fp64", 8),
        (torch.float64, "fp64", 2),
        (torch.float32, "fp32", 2),
    ],
)
def test_eager_matmul_counts_real_arithmetic_at_its_precision(dtype, precision, per_mac):
    """Red-team finding (issue 27): torch's flop formulas count a complex multiply-add as one real one (2 flops; it
    is 4 real multiplies and 4 adds), so a matmul done as a complex mm of half the width was priced at half price."""
    m, kk, n = 8, 16, 4
    x, y = torch.randn(m, kk, dtype=dtype), torch.randn(kk, n, dtype=dtype)
    with AtenCounter() as ref:
        torch.mm(x, y)
    (r,) = ref.launches
    item = torch.empty(0, dtype=dtype).element_size()
    assert (r.flops, r.read_bytes, r.write_bytes) == (
        {precision: per_mac * m * kk * n},
        (m + n) * kk * item,
        m * n * item,
    )


def test_modelled_triton_share_is_of_device_time():
    """Coverage under the CPU model (issue 27): the Triton launches' share of device time, launch overheads left out
    (a profiler times kernels, not launches), so a token kernel beside an eager matmul covers next to nothing."""
    a, b, o = torch.randn(256, 256), torch.randn(256, 256), torch.empty(16)
    with AtenCounter() as ref:
        out = torch.mm(a, b)
    with TritonCounter() as c:
        k.add_kernel[(1,)](out, out, o, 16, BLOCK=16)
    t = model_time(ref.launches + c.launches, H200)
    mm, token = (launch_seconds(x, H200) - 4e-6 for x in ref.launches + c.launches)
    assert (t.kernel_seconds, t.triton_seconds) == (pytest.approx(mm + token), pytest.approx(token))
    assert (t.launches, t.triton_launches) == (2, 1)
    assert t.triton_share == pytest.approx(token / (mm + token)) and t.triton_share < 0.01
    assert model_time(c.launches, H200).triton_share == 1.0 and model_time([], H200).triton_share is None
