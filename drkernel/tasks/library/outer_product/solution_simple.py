import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_copy_kernel(b_ptr, a_ptr, c_ptr, N, BLOCK: tl.constexpr):
    # Row i of the result is b * a[i]; one row per program.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    scale = tl.load(a_ptr + row)
    tl.store(c_ptr + row * N + cols, tl.load(b_ptr + cols, mask=mask, other=0.0) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        M, N = a.numel(), b.numel()
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        scaled_copy_kernel[(M,)](b, a, c, N, BLOCK=triton.next_power_of_2(N))
        return c
