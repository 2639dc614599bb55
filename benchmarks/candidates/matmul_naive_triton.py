"""Honest but deliberately naive Triton matmul for KernelBench level1/2_Standard_matrix_multiplication_: each program
owns a 64x64 output tile and adds one rank-1 outer product per k (no tl.dot, no tensor cores, no K tiling), in exact
fp32. Correct for any shape and several times slower than cuBLAS on a GPU: the slow end of the set."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_rank1_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                        BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K):
        a = tl.load(a_ptr + rm * sam + k * sak, mask=rm < M, other=0.0)
        b = tl.load(b_ptr + k * sbk + rn * sbn, mask=rn < N, other=0.0)
        acc += a[:, None] * b[None, :]
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=torch.float32)
        grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
        matmul_rank1_kernel[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0),
                                  C.stride(1), BM=64, BN=64)
        return C
