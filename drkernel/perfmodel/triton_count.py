"""Counting what Triton launches do, as the interpreter executes them (TRITON_INTERPRET=1).

Every load, store and atomic the interpreter performs goes through one `InterpreterBuilder` method with
the element addresses (a numpy array) and the mask; `tl.dot` goes through `create_dot` with the operand
blocks (`tl.dot_scaled` through `create_dot_scaled`). Wrapping those methods (for the duration of a
`TritonCounter` only) counts each launch: DRAM traffic as the distinct memory sectors read and written
(32 B on NVIDIA, the GPU profile's `sector_bytes`: a GPU moves whole sectors, so a kernel that loads only the
high half of each fp32 moves every byte of it; issue 35), sectors re-read across programs (sectors another
program of the launch loaded: L2) and within one program (L1 / shared memory; each access counts the sectors it
touches), matmul flops by precision ("tf32", "tf32x3", "bf16", "fp32", "fp64"), other elementwise work
("vector": every integer, floating-point or pointer op, one per result element; reductions, scans and
histograms one per element reduced), and the programs of the grid.

Every other builder operation the interpreter can run is either known to launch no work (shapes, program ids,
casts of pointers) or refused (Unsupported): an operation added in a later Triton is refused until priced.

With `allowed` address ranges every access is checked before it happens: an access outside them raises
OutsideBuffers (the replay hands a kernel only the buffers its trace reported). With `counting=False` only that
check is installed (the candidate's own process: each launch may touch only its tensor arguments' storages).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from drkernel.perfmodel.cost import SECTOR_BYTES, LaunchCount

# Elementwise work outside tl.dot, integer or floating point, priced at the CUDA-core rate: ops per result
# element. Address arithmetic counts too (it is real work, and negligible beside memory in an honest kernel);
# shape-only ops (reshape, broadcast, splat, ...) and pointer offsets do not. Integer ops were once free, and a
# matmul written as integer products plus tl.sum was then priced as memory only (red-team finding).
VECTOR_OPS = {
    **{
        f"create_{op}": 1
        for op in (
            *("fadd", "fsub", "fmul", "fdiv", "frem", "precise_divf", "approx_divf", "fneg", "fabs"),
            *("exp", "exp2", "log", "log2", "sqrt", "precise_sqrt", "rsqrt", "sin", "cos", "erf", "ceil", "floor"),
            *("add", "sub", "mul", "umulhi", "sdiv", "udiv", "idiv", "srem", "urem", "iabs"),
            *("and", "or", "xor", "shl", "lshr", "ashr", "select", "clampf"),
            *("maximumf", "maxnumf", "minimumf", "minnumf", "maxsi", "maxui", "minsi", "minui"),
            *("fp_ext", "fp_trunc", "fp_to_fp", "fp_to_si", "fp_to_ui", "si_to_fp", "ui_to_fp", "int_cast"),
            *(f"fcmp{c}" for c in ("OEQ", "OGE", "OGT", "OLE", "OLT", "ONE", "UEQ", "UGE", "UGT", "ULE", "ULT", "UNE")),
            *(f"icmp{c}" for c in ("EQ", "NE", "SGE", "SGT", "SLE", "SLT", "UGE", "UGT", "ULE", "ULT")),
            "gather",
            "addptr",  # pointer arithmetic is integer arithmetic (red-team finding: it was free)
        )
    },
    "create_fma": 2,
    "create_extern_elementwise": 4,  # libdevice math (tanh, pow, ...): several instructions each
}
# Builder operations that do no arithmetic and move no memory: shapes and layouts, program ids, constants, casts
# between pointers and integers of the same bits, and hints. Every `create_*` in neither this set nor a priced one
# is refused while counting.
FREE_OPS = frozenset(
    f"create_{op}"
    for op in (
        *("splat", "unsplat", "broadcast", "expand_dims", "reshape", "trans", "join", "split", "cat"),
        *("make_range", "get_program_id", "get_num_programs", "bitcast", "int_to_ptr", "ptr_to_int"),
        "make_tensor_descriptor",  # a description of a block: its loads and stores are counted where they happen
        *("assume", "assert", "barrier"),
    )
)
# Memory operations that reach the counted masked load / store (the interpreter implements them through those;
# tensor descriptors materialise their pointers first: red-team note N1, an honest descriptor kernel was refused).
ROUTED_OPS = frozenset(
    {"create_load", "create_store", "create_atomic_load", "create_atomic_store", "create_atomic_poll"}
    | {"create_descriptor_load", "create_descriptor_store", "create_descriptor_gather", "create_descriptor_scatter"}
)
# A program's own re-reads are served by L1 / shared memory only while its distinct loads fit there (256 KiB per
# SM on Hopper, 192 on Ampere); a program that re-reads a larger working set goes to the L2 (red-team finding: a
# single program looping over a whole matmul had 64 MB of re-reads priced at the L1 rate).
L1_BYTES_PER_PROGRAM = 256 * 1024


class OutsideBuffers(RuntimeError):
    """A kernel touched memory outside the buffers it was given."""


class Unsupported(RuntimeError):
    """A Triton operation the counter does not price (inline assembly, prints, anything newer than this list)."""


class Race(RuntimeError):
    """Programs of one launch touched the same bytes, one of them with a plain store: the interpreter runs programs
    one after another, so the result depends on an order a GPU does not keep."""


def _precision(a: Any, input_precision: Any) -> str:
    """The pipe a GPU runs this dot on. input_precision matters for fp32 operands only: fp64 operands run on the
    FP64 units whatever it says (red-team finding: an fp64 dot was priced at the TF32 rate, 7.4x fp32's)."""
    ty = a.dtype.scalar if hasattr(a.dtype, "scalar") else a.dtype
    if ty.primitive_bitwidth <= 16:
        return "bf16"
    if ty.primitive_bitwidth == 64:
        return "fp64"
    text = str(input_precision).upper()
    if "IEEE" in text:
        return "fp32"
    if "X3" in text or "X6" in text:
        return "tf32x3"
    return "tf32"


class _Launch:
    def __init__(self, name: str, sector: int = SECTOR_BYTES) -> None:
        self.name, self.sector = name, sector
        self.program: list[np.ndarray] = []  # this program's load addresses, one array per access
        self.program_sizes: list[int] = []
        self.loads: list[tuple[np.ndarray, np.ndarray]] = []  # per finished program: its loaded sector ranges
        self.loaded = 0  # bytes of the sectors each access touched, summed over accesses
        self.program_unique = 0  # sum over programs of the bytes of the distinct sectors each loaded
        self.spilled = 0  # re-reads of programs whose distinct loads exceed L1_BYTES_PER_PROGRAM: L2, not L1
        self.programs = 0
        self.stores: list[np.ndarray] = []
        self.store_sizes: list[int] = []
        self.program_stores: list[np.ndarray] = []  # this program's plain (non-atomic) store addresses
        self.program_store_sizes: list[int] = []
        self.plain: list[tuple[int, np.ndarray, np.ndarray, bool]] = []  # (program, starts, ends, is_store) ranges
        self.flops: dict[str, float] = {}

    def add_flops(self, kind: str, n: float) -> None:
        self.flops[kind] = self.flops.get(kind, 0.0) + n

    def end_program(self) -> None:
        if self.program_stores:
            s, e = _union(*_ranges(self.program_stores, self.program_store_sizes))
            self.plain.append((self.programs, s, e, True))
            self.program_stores, self.program_store_sizes = [], []
        if not self.program:
            return
        # One access (a warp's worth of lanes on a GPU) moves each sector it touches once, however many lanes hit it.
        loaded = sum(
            _covered(*_union(*_sectors(*_ranges([a], [n]), self.sector)))
            for a, n in zip(self.program, self.program_sizes)
        )
        starts, ends = _union(*_ranges(self.program, self.program_sizes))
        sector_starts, sector_ends = _union(*_sectors(starts, ends, self.sector))
        unique = _covered(sector_starts, sector_ends)
        self.loaded += loaded
        self.program_unique += unique
        if unique > L1_BYTES_PER_PROGRAM:
            self.spilled += loaded - unique
        self.loads.append((sector_starts, sector_ends))
        self.plain.append((self.programs, starts, ends, False))
        self.program, self.program_sizes = [], []

    def check_races(self) -> None:
        """Raise Race when a program plainly stored bytes another program of the launch loaded or stored (atomics
        aside). Red-team finding: a split-K matmul adding partial tiles into C with load + add + store was right in
        the interpreter, which runs programs in turn, and loses updates on a GPU, where they run at once."""
        stores = [(p, s, e) for p, s, e, st in self.plain if st]
        if not stores:
            return
        owner = np.concatenate([np.full(s.size, p, dtype=np.int64) for p, s, _ in stores])
        s_all = np.concatenate([s for _, s, _ in stores])
        e_all = np.concatenate([e for _, _, e in stores])
        order = np.argsort(s_all, kind="stable")
        owner, s_all, e_all = owner[order], s_all[order], e_all[order]
        if s_all.size > 1 and (s_all[1:] < np.maximum.accumulate(e_all)[:-1]).any():
            raise Race("two programs of one launch stored the same bytes without atomics")
        loads = [(p, s, e) for p, s, e, st in self.plain if not st and s.size]
        if not loads:
            return
        changed = np.concatenate([[0], np.cumsum(owner[1:] != owner[:-1])])
        reader = np.concatenate([np.full(s.size, p, dtype=np.int64) for p, s, _ in loads])
        lo = np.searchsorted(e_all, np.concatenate([s for _, s, _ in loads]), side="right")  # stores ending after
        hi = np.searchsorted(s_all, np.concatenate([e for _, _, e in loads]), side="left")  # stores starting before
        hit = hi > lo
        lo, hi, reader = lo[hit], hi[hit], reader[hit]
        if (owner[lo] != reader).any() or (changed[hi - 1] != changed[lo]).any():
            raise Race("a program of one launch loaded bytes another program stored without atomics")

    def count(self) -> LaunchCount:
        self.end_program()
        self.check_races()
        read = 0
        if self.loads:
            starts, ends = _union(*(np.concatenate(part) for part in zip(*self.loads)))
            read = int((ends - starts).sum())
        written = 0
        if self.stores:
            written = _covered(*_union(*_sectors(*_ranges(self.stores, self.store_sizes), self.sector)))
        return LaunchCount(
            self.name,
            "triton",
            read,
            written,
            self.program_unique - read + self.spilled,
            dict(self.flops),
            self.loaded - self.program_unique - self.spilled,
            self.programs,
        )


def _ranges(addrs: list[np.ndarray], sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """[start, end) byte ranges of accesses: each element access covers `size` bytes from its address."""
    starts = np.concatenate(addrs).astype(np.uint64)
    ends = starts + np.concatenate([np.full(a.size, s, dtype=np.uint64) for a, s in zip(addrs, sizes)])
    return starts, ends


def _sectors(starts: np.ndarray, ends: np.ndarray, sector: int) -> tuple[np.ndarray, np.ndarray]:
    """Byte ranges widened to the whole sectors they touch: the unit a GPU moves between DRAM, L2 and the SMs."""
    s = np.uint64(sector)
    return starts // s * s, (ends + s - np.uint64(1)) // s * s


def _covered(starts: np.ndarray, ends: np.ndarray) -> int:
    """Bytes in disjoint ranges (_union's)."""
    return int((ends - starts).sum()) if starts.size else 0


def _union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint byte ranges covering the given ones. Bytes, not addresses, are what a kernel moves: a one-byte
    access at an address does not make a later four-byte access there cost one byte (red-team finding)."""
    if not starts.size:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], np.maximum.accumulate(ends[order])
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > e[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return s[first], e[last]


class TritonCounter:
    """Context manager: counts every interpreted launch while active; `launches` holds the counts."""

    def __init__(
        self, allowed: list[tuple[int, int]] | None = None, sector_bytes: int = SECTOR_BYTES, counting: bool = True
    ) -> None:
        self.sector_bytes = sector_bytes
        self.counting = counting
        self.launches: list[LaunchCount] = []
        self._current: _Launch | None = None
        self._saved: list[tuple[type, str, Any]] = []
        self._options: Any = None
        self._starts: np.ndarray | None = None
        self._ends: np.ndarray | None = None
        if allowed is not None:
            self.set_allowed(allowed)

    def set_allowed(self, ranges: list[tuple[int, int]]) -> None:
        """The address ranges [start, end) every access must fall in."""
        ordered = sorted(ranges)
        self._starts = np.array([r[0] for r in ordered], dtype=np.uint64)
        self._ends = np.array([r[1] for r in ordered], dtype=np.uint64)

    def allowed(self) -> list[tuple[int, int]] | None:
        """The ranges set now (None: unchecked), to put back after a nested launch."""
        if self._starts is None or self._ends is None:
            return None
        return [(int(a), int(b)) for a, b in zip(self._starts, self._ends, strict=True)]

    # -- bookkeeping ------------------------------------------------------------------------------
    def _check(self, addrs: np.ndarray, size: int) -> None:
        if self._starts is None or self._ends is None or not addrs.size:
            return
        if not self._starts.size:
            raise OutsideBuffers("an access while no buffer is reported")
        a = addrs.astype(np.uint64, copy=False)
        idx = np.searchsorted(self._starts, a, side="right").astype(np.int64) - 1
        ok = idx >= 0
        safe = np.where(ok, idx, 0)
        ok &= a + np.uint64(size) <= self._ends[safe]
        if not ok.all():
            bad = int(a[~ok][0])
            raise OutsideBuffers(f"access at {bad:#x} outside the buffers the launch was given")

    def _access(self, into: str, ptrs: Any, mask: Any, atomic: bool = False) -> None:
        from triton.runtime.interpreter import _get_np_dtype

        size = np.dtype(_get_np_dtype(ptrs.get_element_ty())).itemsize
        data = np.asarray(ptrs.data)
        on = data if mask is None else data[np.broadcast_to(np.asarray(mask.data, dtype=bool), data.shape)]
        on = on.reshape(-1).astype(np.uint64)
        self._check(on, size)
        if self._current is None:
            return
        if into == "load":
            self._current.program.append(on)
            self._current.program_sizes.append(size)
        else:
            self._current.stores.append(on)
            self._current.store_sizes.append(size)
            if not atomic:
                self._current.program_stores.append(on)
                self._current.program_store_sizes.append(size)

    # -- installation -----------------------------------------------------------------------------
    def _patch(self, cls: type, name: str, make: Any) -> None:
        original = getattr(cls, name)
        self._saved.append((cls, name, original))
        setattr(cls, name, make(original))

    def __enter__(self) -> TritonCounter:
        from triton.runtime.interpreter import (
            InterpretedFunction,
            InterpreterBuilder,
            ReduceScanOpInterface,
            interpreter_builder,
        )

        counter = self

        def masked_load(original: Any) -> Any:
            def f(builder: Any, ptrs: Any, mask: Any, other: Any, *rest: Any, **named: Any) -> Any:
                counter._access("load", ptrs, mask)
                return original(builder, ptrs, mask, other, *rest, **named)

            return f

        def masked_store(original: Any) -> Any:
            def f(builder: Any, ptrs: Any, value: Any, mask: Any, *rest: Any, **named: Any) -> Any:
                counter._access("store", ptrs, mask)
                return original(builder, ptrs, value, mask, *rest, **named)

            return f

        def atomic_rmw(original: Any) -> Any:
            def f(builder: Any, op: Any, ptr: Any, val: Any, mask: Any, *rest: Any) -> Any:
                counter._access("load", ptr, mask)
                # An exchange writes a value computed elsewhere, as a plain store does: what it writes after a plain
                # load of bytes other programs also write loses their updates on a GPU (red-team finding F8).
                counter._access("store", ptr, mask, atomic="XCHG" not in str(op).upper())
                return original(builder, op, ptr, val, mask, *rest)

            return f

        def atomic_cas(original: Any) -> Any:
            def f(builder: Any, ptr: Any, *rest: Any) -> Any:
                counter._access("load", ptr, None)
                # In the interpreter a compare-and-swap of the value just loaded always succeeds, so a single one is a
                # plain store there and a lost update on a GPU (red-team finding F8b): the race check treats it so
                # (a lock built on it guards plain loads and stores, which the check refuses anyway).
                counter._access("store", ptr, None, atomic=False)
                return original(builder, ptr, *rest)

            return f

        def dot(original: Any) -> Any:
            def f(builder: Any, a: Any, b: Any, d: Any, input_precision: Any, *rest: Any) -> Any:
                if counter._current is not None:
                    sa, sb = np.shape(a.data), np.shape(b.data)
                    batch = int(np.prod(sa[:-2])) if len(sa) > 2 else 1
                    flops = 2.0 * batch * sa[-2] * sa[-1] * sb[-1]
                    p = _precision(a, input_precision)
                    counter._current.add_flops(p, flops)
                return original(builder, a, b, d, input_precision, *rest)

            return f

        def dot_scaled(original: Any) -> Any:
            def f(builder: Any, lhs: Any, lhs_scale: Any, lhs_format: Any, rhs: Any, rhs_scale: Any, rhs_format: Any,
                  *rest: Any) -> Any:  # fmt: skip
                if counter._current is not None:
                    sa, sb = np.shape(lhs.data), np.shape(rhs.data)
                    batch = int(np.prod(sa[:-2])) if len(sa) > 2 else 1
                    packed = any("E2M1" in str(fmt).upper() for fmt in (lhs_format, rhs_format))  # two fp4 per byte
                    k = max(sa[-1], sb[-2]) * (2 if packed else 1)
                    flops = 2.0 * batch * sa[-2] * k * sb[-1]  # priced at the bf16 rate (fp8/fp4 run faster)
                    counter._current.add_flops("bf16", flops)
                return original(builder, lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, *rest)

            return f

        def unsupported(name: str) -> Any:
            def make(original: Any) -> Any:
                def f(*args: Any, **kwargs: Any) -> Any:
                    raise Unsupported(f"tl operation {name.removeprefix('create_')} is not counted by the CPU model")

                return f

            return make

        def histogram(original: Any) -> Any:
            def f(builder: Any, data: Any, *rest: Any) -> Any:  # one shared-memory atomic per element binned
                if counter._current is not None:
                    counter._current.add_flops("vector", float(np.size(data.data)))
                return original(builder, data, *rest)

            return f

        def run(original: Any) -> Any:
            def f(jit_self: Any, *args: Any, **kwargs: Any) -> Any:
                if kwargs.get("warmup"):
                    return original(jit_self, *args, **kwargs)
                outer, counter._current = (
                    counter._current,
                    _Launch(getattr(jit_self.fn, "__name__", "?"), counter.sector_bytes),
                )
                try:
                    return original(jit_self, *args, **kwargs)
                finally:
                    launch, counter._current = counter._current, outer
                    counter.launches.append(launch.count())

            return f

        self._patch(InterpreterBuilder, "create_masked_load", masked_load)
        self._patch(InterpreterBuilder, "create_masked_store", masked_store)
        self._patch(InterpreterBuilder, "create_atomic_rmw", atomic_rmw)
        self._patch(InterpreterBuilder, "create_atomic_cas", atomic_cas)
        if not self.counting:  # every access of the interpreter reaches one of the four above (ROUTED_OPS)
            return self
        self._patch(InterpreterBuilder, "create_dot", dot)
        if hasattr(InterpreterBuilder, "create_dot_scaled"):
            self._patch(InterpreterBuilder, "create_dot_scaled", dot_scaled)
        if hasattr(InterpreterBuilder, "create_histogram"):
            self._patch(InterpreterBuilder, "create_histogram", histogram)

        def arithmetic(flops_per_element: int) -> Any:
            def make(original: Any) -> Any:
                def f(builder: Any, *args: Any) -> Any:
                    ret = original(builder, *args)
                    if counter._current is not None:
                        n = float(np.size(ret.data)) * flops_per_element
                        counter._current.add_flops("vector", n)
                    return ret

                return f

            return make

        for name, per in VECTOR_OPS.items():
            if hasattr(InterpreterBuilder, name):
                self._patch(InterpreterBuilder, name, arithmetic(per))
        counted = {name for _, name, _ in self._saved} | FREE_OPS | ROUTED_OPS
        for name in sorted(dir(InterpreterBuilder)):  # descriptors, inline asm, print, anything newer: refused
            if name.startswith("create_") and name not in counted:
                self._patch(InterpreterBuilder, name, unsupported(name))

        def grid_idx(original: Any) -> Any:
            def f(builder: Any, *args: Any) -> Any:
                if counter._current is not None:
                    counter._current.end_program()
                    counter._current.programs += 1
                return original(builder, *args)

            return f

        def reduce_or_scan(original: Any) -> Any:
            def f(op: Any, input: Any) -> Any:  # tl.sum, tl.max, tl.reduce, tl.cumsum, ...: numpy, not the builder
                if counter._current is not None and isinstance(input, tuple):
                    n = sum(float(np.size(t.handle.data)) for t in input)  # one combine per element reduced
                    counter._current.add_flops("vector", n)
                return original(op, input)

            return f

        self._patch(ReduceScanOpInterface, "apply", reduce_or_scan)
        # The interpreter checks integer arithmetic for overflow with extra builder ops (casts, compares) that a
        # compiled kernel does not run; off while counting, so only the kernel's own work is counted.
        self._options = interpreter_builder.options
        interpreter_builder.options = dataclasses.replace(self._options, sanitize_overflow=False)

        self._patch(InterpreterBuilder, "set_grid_idx", grid_idx)
        self._patch(InterpretedFunction, "run", run)
        return self

    def __exit__(self, *exc: object) -> None:
        from triton.runtime.interpreter import interpreter_builder

        for cls, name, original in reversed(self._saved):
            setattr(cls, name, original)
        self._saved.clear()
        if self._options is not None:
            interpreter_builder.options, self._options = self._options, None
