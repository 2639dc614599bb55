import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, r_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask, other=0.0) + tl.load(r_ptr + offs, mask=mask, other=0.0),
             mask=mask)


class ModelNew(nn.Module):
    """Triton only for the residual add; the normalization is torch's layer_norm."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        residual = residual.contiguous()
        h = torch.empty_like(x)
        add_kernel[(triton.cdiv(x.numel(), 2048),)](x, residual, h, x.numel(), BLOCK=2048)
        return F.layer_norm(h, (h.shape[-1],), self.weight, self.bias, self.eps)
