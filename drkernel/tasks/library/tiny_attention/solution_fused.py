import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq, dim, scale,
                     BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    # One (batch, head) per program: the whole score matrix fits in registers, so
    # QK^T, softmax and PV happen without writing the scores out.
    head = tl.program_id(0)
    base = head * seq * dim
    s_idx = tl.arange(0, BLOCK_S)
    d_idx = tl.arange(0, BLOCK_D)
    tile_mask = (s_idx[:, None] < seq) & (d_idx[None, :] < dim)
    tile = base + s_idx[:, None] * dim + d_idx[None, :]
    q = tl.load(q_ptr + tile, mask=tile_mask, other=0.0)
    k = tl.load(k_ptr + tile, mask=tile_mask, other=0.0)
    v = tl.load(v_ptr + tile, mask=tile_mask, other=0.0)
    scores = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
    key_ok = s_idx[None, :] < seq
    scores = tl.where(key_ok, scores, -float("inf"))
    p = tl.where(key_ok, tl.exp(scores - tl.max(scores, axis=1)[:, None]), 0.0)
    p = p / tl.sum(p, axis=1)[:, None]
    out = tl.dot(p, v, input_precision="ieee")
    tl.store(o_ptr + tile, out, mask=tile_mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        batch, heads, seq, dim = q.shape
        out = torch.empty_like(q)
        attention_kernel[(batch * heads,)](
            q, k, v, out, seq, dim, dim ** -0.5,
            BLOCK_S=max(16, triton.next_power_of_2(seq)), BLOCK_D=max(16, triton.next_power_of_2(dim)))
        return out
