"""Red team: a wrong kernel (returns zeros) turns its zero reward into an infra_error (a masked sample).
Through the `torch.builtins.exec` gate hole it makes the Runner answer the first order with the header
{"type": []}: protocol.validate tests `kind not in SCHEMAS` with an unhashable value, raises TypeError instead
of ProtocolError, Channel.reply does not catch it, and the judge reports "judge failed" (infra)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

torch.builtins.exec("""
import sys
R = sys.modules["drkernel.verify.harness.runner"].Runner
def _stage(self, *args):
    self.conn.send_bytes(b'{"type": []}')
R._stage = _stage
""")


@triton.jit
def zero_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        out = torch.empty_like(a)
        zero_kernel[(triton.cdiv(a.numel(), 1024),)](out, a.numel(), BLOCK=1024)
        return out
