"""The judge's one-pass comparison kernel (CUDA) agrees with the torch formulation it replaces.

Run on CPU through the Triton interpreter in a child process (TRITON_INTERPRET must be set before Triton is
imported); on the H200 the same kernel runs compiled inside every large comparison of the GPU tests."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

SCRIPT = r"""
import json, math, torch
from drkernel.verify.judging import compare_kernel, tensors

def torch_way(r, c, atol, rtol):
    nan_bad = int((torch.isnan(c) & ~torch.isnan(r)).sum())
    inf_bad = int((torch.isinf(c) & ~torch.isinf(r)).sum())
    close, worst, err, norm = tensors._tensor_stats(r, c, atol, rtol)
    return [nan_bad, inf_bad, close, worst, err, norm]

g = torch.Generator().manual_seed(0)
n = 3 * compare_kernel.BLOCK + 17  # a ragged last block
r = torch.randn(n, generator=g)
cases = {
    "equal": r.clone(),
    "noise": r + 1e-3 * torch.randn(n, generator=g),
    "one_far": r.clone().index_fill_(0, torch.tensor([5]), 50.0),
    "nan": r.clone().index_fill_(0, torch.tensor([7, n - 1]), float("nan")),
    "inf": r.clone().index_fill_(0, torch.tensor([9]), float("inf")),
}
ref_special = r.clone()
ref_special[3], ref_special[4] = float("nan"), float("inf")
both = ref_special.clone()  # NaN where the reference is NaN, the same Inf: close, and left out of the norms
out = {name: [list(compare_kernel.stats(r, c, 1e-2, 1e-2)), torch_way(r, c, 1e-2, 1e-2)] for name, c in cases.items()}
out["both_special"] = [list(compare_kernel.stats(ref_special, both, 1e-2, 1e-2)),
                       torch_way(ref_special, both, 1e-2, 1e-2)]
opposite = ref_special.clone()
opposite[4] = float("-inf")
out["opposite_inf"] = [list(compare_kernel.stats(ref_special, opposite, 1e-2, 1e-2)),
                       torch_way(ref_special, opposite, 1e-2, 1e-2)]
r_big, c_big = r.clone(), r.clone()
r_big[11], c_big[11] = 100.0, 101.02  # |d| = 1.02: above atol + rtol*|r| = 1.01, below atol + rtol*|c|
out["borderline"] = [list(compare_kernel.stats(r_big, c_big, 1e-2, 1e-2)), torch_way(r_big, c_big, 1e-2, 1e-2)]
huge = r * 1e18  # squares beyond float32's range: the sums must not overflow
out["huge"] = [list(compare_kernel.stats(huge, huge * (1 + 1e-3), 1e-2, 1e-2)),
               torch_way(huge, huge * (1 + 1e-3), 1e-2, 1e-2)]
h = r.half()
h2 = (r + 2e-3).half()
out["half"] = [list(compare_kernel.stats(h, h2, 1e-2, 1e-2)), torch_way(h, h2, 1e-2, 1e-2)]
print(json.dumps(out))
"""


def _run() -> dict:
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_kernel_matches_torch_formulation():
    out = _run()
    for name, (kernel, reference) in out.items():
        k_nan, k_inf, k_close, k_worst, k_err, k_norm = kernel
        t_nan, t_inf, t_close, t_worst, t_err, t_norm = reference
        assert (k_nan, k_inf, k_close) == (t_nan, t_inf, t_close), name
        assert abs(k_worst - t_worst) <= 1e-6 * max(1.0, t_worst), name
        assert abs(k_err - t_err) <= 1e-4 * max(1e-6, t_err), name
        assert abs(k_norm - t_norm) <= 1e-4 * t_norm, name
    assert out["equal"][0][:3] == [0, 0, True] and out["equal"][0][4] == 0.0
    assert out["one_far"][0][2] is False and abs(out["one_far"][0][3] - 50.0) < 5
    assert out["nan"][0][0] == 2 and out["inf"][0][1] == 1
    assert out["both_special"][0][:3] == [0, 0, True]
    assert out["opposite_inf"][0][2] is False
    assert out["huge"][0][2] is True and math.isfinite(out["huge"][0][4]) and out["huge"][0][4] > 0
    assert out["borderline"][0][2] is False  # the tolerance scales with the reference, not the candidate
