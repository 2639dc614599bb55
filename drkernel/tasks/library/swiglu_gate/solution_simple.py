import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def silu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, g / (1.0 + tl.exp(-g)), mask=mask)


class ModelNew(nn.Module):
    """torch splits and copies the halves and multiplies; Triton only applies SiLU."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        gate = gate.contiguous()
        act = torch.empty_like(gate)
        silu_kernel[(triton.cdiv(gate.numel(), 1024),)](gate, act, gate.numel(), BLOCK=1024)
        return act * up
