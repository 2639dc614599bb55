"""Where a fresh process's first Triton kernels spend their time, with a fresh and with a warm TRITON_CACHE_DIR.

Why (issue 26): every evaluation's candidate runs in a new process with an empty Triton cache, so the one-time
costs of Triton in a process land in its first correctness trial. Run on a GPU host:
`python3 benchmarks/triton_first_kernel.py`; each line is one fresh interpreter (seconds per step).
"""

import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json
import time

t0 = time.perf_counter()
import torch
import triton
import triton.language as tl

t = {"import": time.perf_counter() - t0}
s = time.perf_counter()
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
t["cuda_ctx"] = time.perf_counter() - s
from triton.runtime import driver

s = time.perf_counter()
driver.active.utils
t["driver_utils"] = time.perf_counter() - s


@triton.jit
def ka(x, y, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    m = o < n
    tl.store(y + o, tl.maximum(tl.load(x + o, mask=m), 0.0), mask=m)


@triton.jit
def kb(x, y, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    m = o < n
    tl.store(y + o, tl.load(x + o, mask=m) * 2.0 + 1.0, mask=m)


@triton.jit
def kc(x, y, n, a, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    m = o < n
    tl.store(y + o, tl.load(x + o, mask=m) * a, mask=m)


x = torch.randn(1 << 20, device="cuda")
y = torch.empty_like(x)
steps = (("kernel_a", ka, ()), ("kernel_b_same_signature", kb, ()), ("kernel_c_new_signature", kc, (1.5,)))
for name, fn, extra in steps:
    s = time.perf_counter()
    fn[(256,)](x, y, x.numel(), *extra, B=4096)
    torch.cuda.synchronize()
    t[name] = time.perf_counter() - s
s = time.perf_counter()
ka[(256,)](x, y, x.numel(), B=4096)
torch.cuda.synchronize()
t["kernel_a_again"] = time.perf_counter() - s
print(json.dumps({k: round(v, 3) for k, v in t.items()}))
"""


def main() -> None:
    child = os.path.join(tempfile.mkdtemp(), "child.py")  # @triton.jit needs its source in a file
    with open(child, "w") as f:
        f.write(CHILD)
    cache = tempfile.mkdtemp()
    for label in ("fresh cache", "warm cache (same dir)", "fresh cache 2"):
        if label == "fresh cache 2":
            cache = tempfile.mkdtemp()
        env = {**os.environ, "TRITON_CACHE_DIR": cache}
        out = subprocess.run([sys.executable, child], env=env, capture_output=True, text=True, timeout=120)
        print(label, out.stdout.strip() or out.stderr[-800:])


if __name__ == "__main__":
    main()
