"""Issue 34, class 2: a jit default the old replay rebuilt and imported in its trusted process. It reaches sys
through a torch submodule carried as a value and rebinds the replay's model_time to price no launch at all."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(
    x_ptr,
    out_ptr,
    n,
    BLOCK: tl.constexpr = (  # noqa: B008
        lambda s: (
            (
                lambda r: (
                    r
                    and s.modules["builtins"].setattr(
                        r, "model_time", (lambda f: lambda c, p: f(c[:0], p))(r.model_time)
                    )
                )
                or 1024
            )(s.modules.get("drkernel.verify.cost_model.replay"))
        )
    )((lambda m: m.os.sys)((torch.autograd.forward_ad,)[0])),  # noqa: B008
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
