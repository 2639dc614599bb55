import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def partial_sum_kernel(x_ptr, part_ptr, n_cols, row_stride, n_chunks, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    cols = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0)
    tl.store(part_ptr + row * n_chunks + chunk, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    """Triton writes per-chunk partial sums; torch adds the partials."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        CHUNK = 128
        n_chunks = triton.cdiv(n_cols, CHUNK)
        partial = torch.empty(n_rows, n_chunks, dtype=x.dtype, device=x.device)
        partial_sum_kernel[(n_rows, n_chunks)](x, partial, n_cols, x.stride(0), n_chunks, CHUNK=CHUNK)
        return partial.sum(dim=1)
