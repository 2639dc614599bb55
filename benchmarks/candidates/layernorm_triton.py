"""Honest Triton LayerNorm for KernelBench level1/40_LayerNorm (any normalized_shape, any row length): rows of millions
of elements are split into 4096-wide chunks so the whole GPU works on a few rows. Pass 1 writes each chunk's mean and
sum of squared deviations (numerically stable inside a chunk), pass 2 merges them per row (Chan's parallel variance),
pass 3 normalizes and applies the LayerNorm's own weight and bias."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def chunk_stats_kernel(x_ptr, mean_ptr, m2_ptr, n, n_chunks, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    offs = chunk * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0).to(tl.float32)
    count = tl.minimum(n - chunk * BLOCK, BLOCK).to(tl.float32)
    mean = tl.sum(x, axis=0) / count
    d = tl.where(mask, x - mean, 0.0)
    tl.store(mean_ptr + row * n_chunks + chunk, mean)
    tl.store(m2_ptr + row * n_chunks + chunk, tl.sum(d * d, axis=0))


@triton.jit
def merge_stats_kernel(mean_ptr, m2_ptr, row_mean_ptr, row_rstd_ptr, n, n_chunks, eps, CHUNK: tl.constexpr,
                       BLOCK_C: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    total = tl.zeros([BLOCK_C], dtype=tl.float32)
    for c0 in range(0, n_chunks, BLOCK_C):
        c = c0 + tl.arange(0, BLOCK_C)
        ok = c < n_chunks
        count = tl.where(ok, tl.minimum(n - c * CHUNK, CHUNK), 0).to(tl.float32)
        total += count * tl.load(mean_ptr + row * n_chunks + c, mask=ok, other=0.0)
    mean = tl.sum(total, axis=0) / n
    m2 = tl.zeros([BLOCK_C], dtype=tl.float32)
    for c0 in range(0, n_chunks, BLOCK_C):
        c = c0 + tl.arange(0, BLOCK_C)
        ok = c < n_chunks
        count = tl.where(ok, tl.minimum(n - c * CHUNK, CHUNK), 0).to(tl.float32)
        d = tl.load(mean_ptr + row * n_chunks + c, mask=ok, other=0.0) - mean
        m2 += tl.load(m2_ptr + row * n_chunks + c, mask=ok, other=0.0) + count * d * d
    var = tl.sum(m2, axis=0) / n
    tl.store(row_mean_ptr + row, mean)
    tl.store(row_rstd_ptr + row, 1.0 / tl.sqrt(var + eps))


@triton.jit
def normalize_kernel(x_ptr, w_ptr, b_ptr, row_mean_ptr, row_rstd_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    y = (x - tl.load(row_mean_ptr + row)) * tl.load(row_rstd_ptr + row) * w + b
    tl.store(out_ptr + row * n + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = self.ln.weight.numel()
        rows = x.numel() // n
        chunk = 4096
        n_chunks = triton.cdiv(n, chunk)
        means = torch.empty((rows, n_chunks), device=x.device, dtype=torch.float32)
        m2s = torch.empty_like(means)
        row_mean = torch.empty((rows,), device=x.device, dtype=torch.float32)
        row_rstd = torch.empty_like(row_mean)
        out = torch.empty_like(x)
        chunk_stats_kernel[(rows, n_chunks)](x, means, m2s, n, n_chunks, BLOCK=chunk)
        merge_stats_kernel[(rows,)](means, m2s, row_mean, row_rstd, n, n_chunks, self.ln.eps, CHUNK=chunk,
                                    BLOCK_C=1024)
        normalize_kernel[(rows, n_chunks)](x, self.ln.weight.contiguous(), self.ln.bias.contiguous(), row_mean,
                                           row_rstd, out, n, BLOCK=chunk)
        return out
