"""The CPU cost model (drkernel.perfmodel, issue 13) against measured H200 speedups.

For every honest candidate of benchmarks/candidate_set.py, on the CPU: trace its forward at the set's tiny
sizes (Triton interpreter), replay the trace on unseen inputs under counting exactly as the verifier's replay
child does (drkernel.verify.cost_model.replay, here in one process: these candidates are our own), and price both sides
on a GPU profile. Two modelled speedups per candidate:
- tiny: both sides counted at the tiny sizes the interpreter can run;
- full: the reference counted at full KernelBench size without running it (FakeTensorMode: shapes only),
  the candidate's per-launch bytes scaled by the reference's full/tiny byte ratio and its flops by the
  reference's flop ratio (launch counts unchanged); in a launch with tl.dot the re-reads scale with the
  flops (a tiled matmul re-reads a tile per output tile) and other arithmetic with the bytes; without
  tl.dot, arithmetic scales with the reference's flops if it has any (a matmul without tl.dot). tl.dot
  flops become the reference's full-size flops (at tiny sizes they include the padding of whole tiles).
  This assumes the candidate's traffic
  grows like the reference's: right for streaming kernels, rough wherever tiling or grids change with size.
With --measured (benchmarks/verifier_bench.py --out on an H200) it prints, per candidate, measured speedup and
modelled/measured ratio, then Spearman's rank correlation and the spread of the ratios.

    python benchmarks/cpu_model_validation.py --kernelbench ../shared/kernelbench/KernelBench
    python benchmarks/cpu_model_validation.py --kernelbench K --measured bench.json --out model.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if "--probe-gpu" not in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

import candidate_set  # noqa: E402
import torch  # noqa: E402

from drkernel.perfmodel import LaunchCount, get_profile, model_time  # noqa: E402
from drkernel.perfmodel.aten_count import AtenCounter  # noqa: E402
from drkernel.verify.cost_model.replay import Replay, load_kernels, trace_locally  # noqa: E402
from drkernel.verify.harness import problem as kb  # noqa: E402
from drkernel.verify.judging import tensors  # noqa: E402


def full_reference_counts(source: str, workdir: str) -> list[LaunchCount]:
    """The reference at full size, shapes only: every aten operator it dispatches, no memory, no arithmetic."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    path = os.path.join(workdir, "reference_full.py")
    Path(path).write_text(source)
    module = kb.import_file(path, "reference_full")
    with FakeTensorMode():
        init = kb.split_init_inputs(module.get_init_inputs())
        model = module.Model(*init[0], **init[1])
        inputs = list(module.get_inputs())
        counter = AtenCounter()
        with torch.no_grad(), counter:
            model(*inputs)
    return counter.launches


def _ratio(full: float, tiny: float) -> float:
    return full / tiny if tiny > 0 else 1.0


def model_candidate_counts(
    parts: dict[str, Any], atol: float, rtol: float, sector_bytes: int = 32
) -> tuple[list[LaunchCount], str]:
    """Replay the trace (as the verifier's replay child does) and return its counted launches."""
    kernels, names = load_kernels(parts["candidate_source"], parts["workdir"])
    inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in parts["inputs"]]
    replay = Replay(parts["trace"], parts["payload"], parts["committed"], inputs, kernels, names, sector_bytes)
    out = replay.run()
    ok, message, _ = tensors.compare(parts["ref_out"], out, atol, rtol, "strict", parts["inputs"] + parts["selection"])
    return replay.counts, "" if ok else message


def one(
    p: candidate_set.Problem, c: candidate_set.Candidate, kernelbench: Path, profile_name: str, workdir: str
) -> dict[str, Any]:
    profile = get_profile(profile_name)
    t0 = time.perf_counter()
    tiny_src = p.source(kernelbench, tiny=True)
    parts = trace_locally(tiny_src, c.path.read_text(), workdir)
    cand, mismatch = model_candidate_counts(parts, 1e-2, 1e-2, profile.sector_bytes)
    row: dict[str, Any] = {
        "problem": p.name,
        "candidate": c.file,
        "cost": p.cost,
        "label": f"{p.name} ({Path(c.file).stem})",
        "replay": mismatch or "match",
    }
    if mismatch:
        return row
    ref_tiny = parts["ref_counts"]
    ref_full = full_reference_counts(p.source(kernelbench), workdir)
    t_ref_tiny, t_cand_tiny = model_time(ref_tiny, profile), model_time(cand, profile)
    t_ref_full = model_time(ref_full, profile)
    byte_scale = _ratio(t_ref_full.read_bytes + t_ref_full.write_bytes, t_ref_tiny.read_bytes + t_ref_tiny.write_bytes)
    flop_scale = _ratio(t_ref_full.flops, t_ref_tiny.flops)
    scaled = []
    for x in cand:
        dot = any(k != "vector" for k in x.flops)
        # with tl.dot: its flops and the tile re-reads grow like the reference's flops, the other arithmetic
        # (epilogue) like the bytes; without: arithmetic grows like the reference's flops when it has any
        # (a matmul written without tl.dot), else like the bytes.
        reread_scale = flop_scale if dot else byte_scale
        vector_scale = byte_scale if dot or t_ref_full.flops == 0 else flop_scale
        # tl.dot flops at tiny sizes include the padding of whole tiles (a 64x64 tile over a 32x32 matrix does
        # 16x the work); at full size tiles are full: the launch's dot flops become its share of the
        # reference's full-size flops.
        dot_total = sum(v for q, c in ((q, c) for c in cand for q in c.flops) if q != "vector" for v in [c.flops[q]])
        flops = {
            k: (v * vector_scale if k == "vector" else t_ref_full.flops * v / dot_total) for k, v in x.flops.items()
        }
        scaled.append(
            LaunchCount(
                x.name,
                x.kind,
                int(x.read_bytes * byte_scale),
                int(x.write_bytes * byte_scale),
                int(x.reread_bytes * reread_scale),
                flops,
                int(x.local_reread_bytes * reread_scale),
            )
        )
    t_cand_full = model_time(scaled, profile)
    row.update(
        {
            "launches": {"candidate": len(cand), "reference": len(ref_tiny), "reference_full": len(ref_full)},
            "tiny": {
                "cand_us": t_cand_tiny.seconds * 1e6,
                "ref_us": t_ref_tiny.seconds * 1e6,
                "speedup": t_ref_tiny.seconds / t_cand_tiny.seconds,
                "cand_bytes": t_cand_tiny.read_bytes + t_cand_tiny.write_bytes,
                "cand_reread": t_cand_tiny.reread_bytes,
                "ref_bytes": t_ref_tiny.read_bytes + t_ref_tiny.write_bytes,
            },
            "full": {
                "cand_us": t_cand_full.seconds * 1e6,
                "ref_us": t_ref_full.seconds * 1e6,
                "speedup": t_ref_full.seconds / t_cand_full.seconds,
                "byte_scale": byte_scale,
                "flop_scale": flop_scale,
            },
            "seconds": time.perf_counter() - t0,
        }
    )
    return row


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman's rho: Pearson correlation of the ranks (ties get their average rank)."""

    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r

    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return cov / den if den else math.nan


def measured_speedups(path: Path) -> dict[str, float]:
    """label -> measured speedup of the first concurrency level's run of verifier_bench.py --out."""
    data = json.loads(path.read_text())
    return {r["label"]: r["speedup"] for r in data["ours"][0]["results"] if r.get("speedup")}


def probe_gpu() -> dict[str, float]:
    """The profile's estimated figures, measured on the local CUDA GPU (CUDA events, medians of repeats):
    DRAM copy bandwidth (1 GiB), L2 copy bandwidth (8 MiB, resident in a 50+ MB L2), and the cost per launch
    of a back-to-back stream of one-element eager operators and of a one-program Triton kernel."""
    import triton
    import triton.language as tl

    @triton.jit
    def one(x):
        tl.store(x, tl.load(x) + 1)

    def timed(fn: Any, reps: int) -> float:
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(5):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3 / reps)
        return statistics.median(times)

    out: dict[str, float] = {}
    for label, n in (("dram", 1 << 28), ("l2", 1 << 21)):
        x, y = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
        reps = 20 if label == "dram" else 2000
        out[f"{label}_copy_bytes_per_s"] = 2 * 4 * n / timed(lambda x=x, y=y: y.copy_(x), reps)
    t = torch.zeros(1, device="cuda")
    out["eager_launch_s"] = timed(lambda: t.add_(1), 5000)
    out["triton_launch_s"] = timed(lambda: one[(1,)](t), 5000)
    a = torch.randn(8192, 8192, device="cuda")
    out["fp32_matmul_flops"] = 2 * 8192**3 / timed(lambda: a @ a, 10)
    torch.backends.cuda.matmul.allow_tf32 = True
    out["tf32_matmul_flops"] = 2 * 8192**3 / timed(lambda: a @ a, 10)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernelbench", type=Path, default=None)
    ap.add_argument("--probe-gpu", action="store_true", help="measure the profile's figures on this CUDA GPU")
    ap.add_argument("--profile", default="h200")
    ap.add_argument(
        "--measured",
        type=Path,
        nargs="+",
        default=None,
        help="verifier_bench.py --out JSON(s) from an H200 (later files win for a label)",
    )
    ap.add_argument("--problems", default="", help="comma list (default: every honest candidate)")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    if a.probe_gpu:
        print(json.dumps(probe_gpu(), indent=1))
        return 0
    if a.kernelbench is None:
        ap.error("--kernelbench is required")
    only = {x.strip() for x in a.problems.split(",") if x.strip()}
    rows = []
    torch.set_num_threads(1)
    for c in candidate_set.honest():
        p = candidate_set.problem(c.problem)
        if only and p.name not in only:
            continue
        with tempfile.TemporaryDirectory(prefix="cpu_model_") as tmp:
            try:
                row = one(p, c, a.kernelbench, a.profile, tmp)
            except Exception as e:  # a candidate the trace or replay cannot handle: reported, not hidden
                row = {
                    "problem": p.name,
                    "candidate": c.file,
                    "cost": p.cost,
                    "label": f"{p.name} ({Path(c.file).stem})",
                    "replay": f"error: {type(e).__name__}: {str(e)[:200]}",
                }
        rows.append(row)
        if "tiny" in row:
            print(
                f"{row['label'][:60]:60s} {row['cost']:11s} launches c/r {row['launches']['candidate']}/"
                f"{row['launches']['reference']}  tiny {row['tiny']['speedup']:6.3f}"
                f"  full {row['full']['speedup']:6.3f}"
                f"  ({row['full']['cand_us']:.1f} vs {row['full']['ref_us']:.1f} us)",
                flush=True,
            )
        else:
            print(f"{row['label'][:60]:60s} {row['cost']:11s} {row['replay']}", flush=True)
    summary: dict[str, Any] = {"profile": a.profile, "rows": rows}
    if a.measured:
        measured = {k: v for path in a.measured for k, v in measured_speedups(path).items()}
        pairs = [(r, measured[r["label"]]) for r in rows if "full" in r and r["label"] in measured]
        print(f"\n{'candidate':60s} {'measured':>9s} {'full':>7s} {'ratio':>7s} {'tiny':>7s} {'ratio':>7s}")
        for r, m in pairs:
            print(
                f"{r['label'][:60]:60s} {m:9.3f} {r['full']['speedup']:7.3f} {r['full']['speedup'] / m:7.2f} "
                f"{r['tiny']['speedup']:7.3f} {r['tiny']['speedup'] / m:7.2f}"
            )
        for which in ("full", "tiny"):
            model = [r[which]["speedup"] for r, _ in pairs]
            meas = [m for _, m in pairs]
            ratios = [x / y for x, y in zip(model, meas)]
            if len(pairs) >= 2:
                logs = [math.log(x) for x in ratios]
                stats = {
                    "n": len(pairs),
                    "spearman": spearman(model, meas),
                    "ratio_min": min(ratios),
                    "ratio_median": statistics.median(ratios),
                    "ratio_max": max(ratios),
                    "ratio_geo_sd": math.exp(statistics.pstdev(logs)),
                }
                summary[f"validation_{which}"] = stats
                print(
                    f"{which}: n={stats['n']} Spearman {stats['spearman']:.3f}; modelled/measured ratio min "
                    f"{stats['ratio_min']:.2f} median {stats['ratio_median']:.2f} max {stats['ratio_max']:.2f} "
                    f"(geometric sd x{stats['ratio_geo_sd']:.2f})"
                )
        summary["measured"] = {r["label"]: m for r, m in pairs}
    if a.out:
        a.out.write_text(json.dumps(summary, indent=1))
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
