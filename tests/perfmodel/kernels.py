"""Small real Triton kernels whose bytes, flops and launches the tests compute by hand."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(a, b, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


@triton.jit
def add_twice_kernel(a, b, o, n, BLOCK: tl.constexpr):
    """a + a + b, loading a twice: the same result with re-read traffic."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(a + offs, mask=m)
    y = tl.load(a + offs, mask=m)
    tl.store(o + offs, x + y + tl.load(b + offs, mask=m), mask=m)


@triton.jit
def add_once_kernel(a, b, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(a + offs, mask=m)
    tl.store(o + offs, x + x + tl.load(b + offs, mask=m), mask=m)


@triton.jit
def row_sum_kernel(x, o, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + row * cols + offs, mask=offs < cols, other=0.0)
    tl.store(o + row, tl.sum(v, axis=0))


@triton.jit
def fused_chain_kernel(x, o, n, BLOCK: tl.constexpr):
    """relu(x * 2 + 1) in one pass."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m)
    tl.store(o + offs, tl.maximum(v * 2.0 + 1.0, 0.0), mask=m)


@triton.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def byte_first_copy_kernel(xb, ob, x, o, n, BLOCK: tl.constexpr):
    """Touches each float's first byte (uint8 views) before the float itself: the red-team byte-size trick."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(ob + offs * 4, tl.load(xb + offs * 4, mask=m), mask=m)
    tl.store(o + offs, tl.load(x + offs, mask=m), mask=m)


@triton.jit
def dot_scaled_kernel(a, b, c, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    x = tl.load(a + rm[:, None] * K + rk[None, :])
    y = tl.load(b + rk[:, None] * N + rn[None, :])
    tl.store(c + rm[:, None] * N + rn[None, :], tl.dot_scaled(x, None, "bf16", y, None, "bf16"))


@triton.jit
def int_products_sum_kernel(a, b, o, K: tl.constexpr):
    """A matmul row written as integer products plus tl.sum: integer work and a reduction, no tl.dot."""
    rk = tl.arange(0, K)
    x = tl.load(a + rk).to(tl.int32)
    y = tl.load(b + rk).to(tl.int32)
    tl.store(o, tl.sum(x * y, axis=0).to(tl.float32))


@triton.jit
def reread_pass_kernel(x, o, n, passes: tl.constexpr, BLOCK: tl.constexpr):
    """One program reads all of x `passes` times: a working set of n * 4 bytes re-read by one program."""
    acc = tl.zeros((BLOCK,), tl.float32)
    for _ in range(passes):
        for start in range(0, n, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            acc += tl.load(x + offs, mask=offs < n, other=0.0)
    tl.store(o + tl.arange(0, BLOCK), acc)


@triton.jit
def fp64_dot_kernel(a, b, c, N: tl.constexpr):
    """fp32 tiles cast to fp64 for tl.dot: exact, whatever input_precision says (the red team's fp64 dot)."""
    r = tl.arange(0, N)
    x = tl.load(a + r[:, None] * N + r[None, :]).to(tl.float64)
    y = tl.load(b + r[:, None] * N + r[None, :]).to(tl.float64)
    tl.store(c + r[:, None] * N + r[None, :], tl.dot(x, y).to(tl.float32))


@triton.jit
def high_half_relu_kernel(xh, oh, n, BLOCK: tl.constexpr):
    """relu on the high 16 bits of each fp32 only (int16 views; bf16 precision): half the bytes of each float."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    h = tl.load(xh + 2 * offs + 1, mask=m)
    tl.store(oh + 2 * offs + 1, tl.where(h < 0, 0, h).to(tl.int16), mask=m)


@triton.jit
def histogram_kernel(x, o, N: tl.constexpr, BINS: tl.constexpr):
    tl.store(o + tl.arange(0, BINS), tl.histogram(tl.load(x + tl.arange(0, N)), BINS))


@triton.jit
def pointer_walk_kernel(x, o, STEPS: tl.constexpr, BLOCK: tl.constexpr):
    """Integer work done as pointer arithmetic: the pointer advances by each loaded value."""
    offs = tl.arange(0, BLOCK)
    p = o + offs * 0
    for _ in tl.static_range(STEPS):
        p += tl.load(x + offs)
    tl.store(o + offs, (p.to(tl.int64) - o.to(tl.int64)).to(tl.int32))


@triton.jit
def inline_asm_kernel(x, o, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [v], dtype=tl.int32, is_pure=True, pack=1)
    tl.store(o + offs, y)


@triton.jit
def descriptor_relu_kernel(x, o, n, BLOCK: tl.constexpr):
    """relu through tensor descriptors (Triton 3.9's block-pointer style): the interpreter loads and stores through
    pointers it materialises, so the counts are those of the pointer kernel."""
    start = tl.program_id(0) * BLOCK
    dx = tl.make_tensor_descriptor(x, shape=[n], strides=[1], block_shape=[BLOCK])
    do = tl.make_tensor_descriptor(o, shape=[n], strides=[1], block_shape=[BLOCK])
    do.store([start], tl.maximum(dx.load([start]), 0.0))


@triton.jit
def pointer_relu_kernel(x, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o + offs, tl.maximum(tl.load(x + offs, mask=m), 0.0), mask=m)


@triton.jit
def xchg_accumulate_kernel(x, y, BLOCK: tl.constexpr):
    """Each program adds its block into y with a plain load, an add and an atomic exchange: a read-modify-write that
    loses updates on a GPU (the exchange is atomic, the read before it is not)."""
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + tl.program_id(0) * BLOCK + offs)
    tl.atomic_xchg(y + offs, tl.load(y + offs) + v)


@triton.jit
def add_accumulate_kernel(x, y, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(y + offs, tl.load(x + tl.program_id(0) * BLOCK + offs))


@triton.jit
def cas_accumulate_kernel(x, y, BLOCK: tl.constexpr):
    """A read-modify-write through one compare-and-swap of the value just loaded, no retry: it always succeeds in the
    interpreter, which runs programs in turn, and loses updates on a GPU."""
    offs = tl.arange(0, BLOCK)
    old = tl.load(y + offs)
    tl.atomic_cas(y + offs, old, old + tl.load(x + tl.program_id(0) * BLOCK + offs))
