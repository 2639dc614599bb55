import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_abt_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # B is loaded as a K x N tile straight from its N x K layout; no transposed copy is made.
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :],
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        bt = tl.load(b_ptr + rn[None, :] * stride_bn + kk[:, None],
                     mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, bt, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        M, K = a.shape
        N = b.shape[0]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        bm, bn, bk = 32, 64, 32
        matmul_abt_kernel[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
            a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
        return c
