import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def chunk_max_kernel(x_ptr, part_ptr, n_cols, row_stride, n_chunks, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    cols = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    tl.store(part_ptr + row * n_chunks + chunk, tl.max(x, axis=0))


class ModelNew(nn.Module):
    """Triton finds the maximum of each chunk; torch reduces the chunk maxima."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        CHUNK = 128
        n_chunks = triton.cdiv(n_cols, CHUNK)
        partial = torch.empty(n_rows, n_chunks, dtype=x.dtype, device=x.device)
        chunk_max_kernel[(n_rows, n_chunks)](x, partial, n_cols, x.stride(0), n_chunks, CHUNK=CHUNK)
        return torch.amax(partial, dim=1)
