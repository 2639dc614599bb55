import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def log1p_exp_neg_abs_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.log(1.0 + tl.exp(-tl.abs(x))), mask=mask)


class ModelNew(nn.Module):
    """Triton computes the correction term; torch adds relu(x)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        tail = torch.empty_like(x)
        n = x.numel()
        BLOCK = 256
        log1p_exp_neg_abs_kernel[(triton.cdiv(n, BLOCK),)](x, tail, n, BLOCK=BLOCK)
        return torch.relu(x) + tail
