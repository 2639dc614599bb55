"""How concurrent evaluations share an accelerator: memory estimates, the exclusive re-run after running out
of memory, and the judge's reuse of what it shared with a runner. The parts are host-side logic, so they run
here; the paths they guard run on the H200 (tests/verify/test_engine_gpu.py, benchmarks/verifier_bench.py)."""

from __future__ import annotations

import threading
import time

import torch

from drkernel.types.verify_result import ErrorInfo, VerifyResult
from drkernel.verify.engine import _Admission, _candidate_out_of_memory, _DeviceMemory, _out_of_memory
from drkernel.verify.judging.outputs import bound_fits as _bound_fits
from drkernel.verify.judging.outputs import fits as _fits
from drkernel.verify.process import protocol


def _later(fn, *args):
    t = threading.Thread(target=fn, args=args, daemon=True)
    t.start()
    return t


def test_memory_requests_wait_until_they_fit():
    mem = _DeviceMemory(10)
    assert mem.acquire(6) == 6
    got = []
    t = _later(lambda: got.append(mem.acquire(6)))
    time.sleep(0.2)
    assert not got  # 6 + 6 > 10: waits
    mem.release(6)
    t.join(5)
    assert got == [6]


def test_a_request_larger_than_the_budget_runs_alone():
    mem = _DeviceMemory(10)
    mem.acquire(3)
    got = []
    t = _later(lambda: got.append(mem.acquire(50)))
    time.sleep(0.2)
    assert not got
    mem.release(3)
    t.join(5)
    assert got == [50]
    other = []
    t2 = _later(lambda: other.append(mem.acquire(1)))
    time.sleep(0.2)
    assert not other  # nothing fits beside the oversized one
    mem.release(50)
    t2.join(5)
    assert other == [1]


def test_exclusive_waits_for_shared_and_holds_new_ones_back():
    adm = _Admission(4)
    events: list[str] = []
    first = adm.shared()
    first.__enter__()

    def exclusive():
        with adm.exclusive():
            events.append("exclusive")
            time.sleep(0.2)
        events.append("exclusive done")

    def shared():
        with adm.shared():
            events.append("shared")

    t1 = _later(exclusive)
    time.sleep(0.1)
    t2 = _later(shared)  # arrives while the exclusive one waits: must not overtake it
    time.sleep(0.2)
    assert events == []
    first.__exit__(None, None, None)
    t1.join(5)
    t2.join(5)
    assert events == ["exclusive", "exclusive done", "shared"]


def test_shared_slots_are_bounded():
    adm = _Admission(2)
    a, b = adm.shared(), adm.shared()
    a.__enter__()
    b.__enter__()
    got = []

    def enter() -> None:
        adm.shared().__enter__()
        got.append(1)

    t = _later(enter)
    time.sleep(0.2)
    assert not got
    a.__exit__(None, None, None)
    t.join(5)
    assert got == [1]


def test_a_slot_knows_whether_another_evaluation_overlapped_it():
    adm = _Admission(4)
    with adm.shared() as alone:
        pass
    assert not alone.shared
    with adm.shared() as first:
        with adm.shared() as second:
            pass
        assert first.shared and second.shared
    with adm.shared() as later:
        pass
    assert not later.shared


def test_a_candidates_out_of_memory_is_its_own_text_and_counts_only_on_a_shared_device():
    said = VerifyResult(error=ErrorInfo(kind="runtime", message="RuntimeError: CUDA out of memory. Tried to allocate"))
    assert _candidate_out_of_memory(said)
    assert not _out_of_memory(said)  # alone, it stands as the candidate's fault: no re-run
    assert not _candidate_out_of_memory(VerifyResult(error=ErrorInfo(kind="output_mismatch", message="out of memory")))


def test_out_of_memory_is_recognised_only_from_the_trusted_side():
    def res(message: str) -> VerifyResult:
        return VerifyResult(error=ErrorInfo(kind="runtime", message=message))

    def infra(message: str) -> VerifyResult:
        return VerifyResult(status="infra_error", error=ErrorInfo(kind="infra", message=message))

    assert _out_of_memory(infra("judge failed: OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB"))
    assert _out_of_memory(infra("out of device memory holding the candidate's outputs: ..."))
    assert _out_of_memory(
        VerifyResult(
            status="infra_error",
            error=ErrorInfo(
                kind="reference", message="reference failed during run: OutOfMemoryError: CUDA out of memory."
            ),
        )
    )
    assert not _out_of_memory(infra("judge failed: ValueError: something else"))
    # The candidate's own fault text never counts: any kernel can raise an exception saying so.
    assert not _out_of_memory(res("harness: OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB"))
    assert not _out_of_memory(VerifyResult())


def test_new_inputs_fit_the_held_sets_only_when_shapes_dtypes_strides_and_scalars_match():
    held = [[torch.zeros(4, 3), 2], [torch.zeros(4, 3), 2]]
    assert _fits(held, [[torch.ones(4, 3), 2]])  # fewer sets than held: the first ones are refilled
    assert not _fits(held, [[torch.ones(4, 3), 2]] * 3)  # more sets than held
    assert not _fits(held, [[torch.ones(3, 4), 2]])
    assert not _fits(held, [[torch.ones(4, 3, dtype=torch.float64), 2]])
    assert not _fits(held, [[torch.ones(3, 4).t(), 2]])  # same shape, other strides
    assert not _fits(held, [[torch.ones(4, 3), 3]])  # a scalar input changed
    assert not _fits([], [[torch.ones(4, 3), 2]])


def test_bound_buffers_fit_only_the_reported_outputs():
    bufs = [torch.empty(2, 5), None]
    tensor = {"kind": "tensor", "dtype": "float32", "shape": [2, 5], "nbytes": 40, "device": "cuda"}
    scalar = {"kind": "scalar", "type": "int", "value": 3}
    assert _bound_fits(bufs, [tensor, scalar])
    assert not _bound_fits(bufs, [{**tensor, "shape": [5, 2]}, scalar])
    assert not _bound_fits(bufs, [{**tensor, "dtype": "float16"}, scalar])
    assert not _bound_fits(bufs, [tensor])
    assert not _bound_fits(bufs, [scalar, scalar])


def test_the_bind_reply_is_part_of_the_protocol():
    assert protocol.validate({"type": "bound"})["type"] == "bound"
