import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def chunk_cumsum_kernel(x_ptr, out_ptr, n_cols, row_stride, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * CHUNK + tl.arange(0, CHUNK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * row_stride + cols, tl.cumsum(x, axis=0), mask=mask)


class ModelNew(nn.Module):
    """Triton scans each chunk on its own; torch adds the running totals of earlier chunks."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        CHUNK = 128
        n_chunks = triton.cdiv(n_cols, CHUNK)
        local = torch.empty_like(x)
        chunk_cumsum_kernel[(n_rows, n_chunks)](x, local, n_cols, x.stride(0), CHUNK=CHUNK)
        padded = torch.nn.functional.pad(local, (0, n_chunks * CHUNK - n_cols))
        chunk_totals = padded.view(n_rows, n_chunks, CHUNK)[:, :, -1]
        offsets = torch.cumsum(chunk_totals, dim=1) - chunk_totals
        return local + offsets.repeat_interleave(CHUNK, dim=1)[:, :n_cols]
