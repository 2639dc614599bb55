import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_affine_kernel(x_ptr, w_ptr, b_ptr, out_ptr, dim, BLOCK: tl.constexpr):
    # One row per program; the nonlinearity is left to torch.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < dim
    x = tl.load(x_ptr + row * dim + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * dim + cols, x * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim))
        self.bias = nn.Parameter(0.5 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        h = torch.empty_like(x)
        row_affine_kernel[(x.shape[0],)](x, self.weight, self.bias, h, x.shape[1],
                                        BLOCK=triton.next_power_of_2(x.shape[1]))
        return torch.clamp(torch.tanh(h), min=-0.5, max=0.5)
