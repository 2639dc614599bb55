import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_softmax_row_kernel(s_ptr, p_ptr, n_cols, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    s = tl.load(s_ptr + row * n_cols + cols, mask=mask, other=-float("inf")) * scale
    e = tl.where(mask, tl.exp(s - tl.max(s, axis=0)), 0.0)
    tl.store(p_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    """Both matmuls stay in torch and the scores are materialized; Triton does the softmax."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)).contiguous()
        seq = scores.shape[-1]
        probs = torch.empty_like(scores)
        scaled_softmax_row_kernel[(scores.numel() // seq,)](
            scores, probs, seq, q.shape[-1] ** -0.5, BLOCK=triton.next_power_of_2(seq))
        return torch.matmul(probs, v)
