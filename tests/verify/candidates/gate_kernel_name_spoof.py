"""Names its kernel like a cuBLAS GEMM so name-based coverage credits it with library time. Expect: forbidden."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), 0.0),
             mask=mask)


add_relu_kernel = sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8


def add_relu(x, y):
    out = torch.empty_like(x)
    add_relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return add_relu(x, y)
