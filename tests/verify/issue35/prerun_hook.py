"""Issue 35, red team F7 (passes the gate): all of the arithmetic is torch's, run by Triton's launcher as a pre-run
hook of a one-element kernel (the launcher calls hook(*kernel_args), here torch.Tensor.addmm_(out, x, w): out += x @ w).
The launch's wall time counted it as kernel time, in the coverage pass and in the timed calls."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_kernel(out_ptr, x_ptr, w_ptr):
    tl.store(out_ptr, tl.load(out_ptr))


touch_kernel.add_pre_run_hook(torch.Tensor.addmm_)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, w):
        y = torch.zeros(x.shape[0], w.shape[1], dtype=x.dtype, device=x.device)
        touch_kernel[(1,)](y, x, w)
        return torch.relu(y).sum(dim=1)
