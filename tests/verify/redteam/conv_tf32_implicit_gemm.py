"""Red team (issue 27 round 2): a 3x3 convolution as an implicit GEMM with Triton's default tl.dot (TF32 on a GPU).
Priced at the TF32 rate against a reference priced at plain FP32, while cuDNN runs that fp32 reference convolution
in TF32 by default (torch.backends.cudnn.conv.fp32_precision == "tf32"): a speedup the GPU would not give."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def conv_kernel(x, w, y, C, H, W, OC, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)  # (n, oh, ow)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)  # oc
    n = rows // (H * W)
    oh = (rows // W) % H
    ow = rows % W
    K = C * 9
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + tl.arange(0, BK)
        c = k // 9
        kh = (k // 3) % 3
        kw = k % 3
        ih = oh[:, None] + kh[None, :] - 1
        iw = ow[:, None] + kw[None, :] - 1
        ok = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a = tl.load(x + ((n[:, None] * C + c[None, :]) * H + ih) * W + iw, mask=ok, other=0.0)
        b = tl.load(w + cols[None, :] * K + k[:, None])
        acc = tl.dot(a, b, acc)
    tl.store(y + ((n[:, None] * OC + cols[None, :]) * H + oh[:, None]) * W + ow[:, None], acc)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(128, 128, 3, padding=1, bias=False)

    def forward(self, x):
        N, C, H, W = x.shape
        w = self.conv.weight
        OC = w.shape[0]
        y = torch.empty(N, OC, H, W, dtype=x.dtype)
        conv_kernel[(N * H * W // 64, OC // 64)](x.contiguous(), w.contiguous(), y, C, H, W, OC, BM=64, BN=64, BK=32)
        return y
