import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_row_kernel(a_ptr, b_ptr, c_ptr, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # One output row per program, as broadcast multiply + reduction (no tensor-core dot).
    row = tl.program_id(0)
    rn = tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + row * K + kk, mask=kk < K, other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.sum(a[:, None] * b, axis=0)
    tl.store(c_ptr + row * N + rn, acc, mask=rn < N)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        matmul_row_kernel[(M,)](a, b, c, N, K, BLOCK_N=triton.next_power_of_2(N), BLOCK_K=64)
        return c
