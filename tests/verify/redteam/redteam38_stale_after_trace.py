"""Red-team (issue 38): an honest Triton ELU for the first three forwards (two correctness trials and the CPU
model's trace, or the first coverage call), then the first output again without computing (result caching). The
calls after those were the coverage pass before issue 38 and are re-validation now: still compared?"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def elu_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.where(x > 0, x, alpha * (tl.exp(tl.minimum(x, 0.0)) - 1.0))
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha
        self.seen = [0]
        self.kept = []

    def forward(self, x):
        self.seen[0] += 1
        if self.seen[0] > 3 and self.kept:
            out = torch.empty_like(x)
            elu_kernel[(1,)](x, out, 0, self.alpha, BLOCK=16)  # a launch, no work: not a decoy by count
            out.copy_(self.kept[0])
            return out
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        elu_kernel[(triton.cdiv(n, 1024),)](x, out, n, self.alpha, BLOCK=1024)
        self.kept.append(out.clone())
        return out
