import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def log_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=1.0)
    tl.store(out_ptr + offsets, tl.log(x), mask=mask)


class ModelNew(nn.Module):
    """Product through logarithms: Triton takes logs, torch sums and exponentiates (positive inputs only)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        logs = torch.empty_like(x)
        n = x.numel()
        BLOCK = 256
        log_kernel[(triton.cdiv(n, BLOCK),)](x, logs, n, BLOCK=BLOCK)
        return torch.exp(logs.sum(dim=1))
