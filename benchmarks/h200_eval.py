"""`drkernel eval` on the H200 in one call (issue 24 item 5): KernelBench level-1 references against themselves on
the named 20-problem subset (benchmarks/kernelbench_l1_20.txt), eager and torch.compile references side by side,
and the shipped library's fused solutions, in chunks that stop before a time budget and still leave reports.

    bash .device-site/install.sh && tar -C /tmp/site -xJf .device-site/verl.tar.xz && \\
    export PYTHONPATH=/tmp/site:$PWD && \\
    python3 benchmarks/h200_eval.py --kb .kb/KernelBench/level1 --out $OUT --budget-s 540

Steps, every file under --out:
1. a ChatML tokenizer (tokenizer/): `reference` and `solution:LABEL` answers generate nothing, the tokenizer only
   keeps the context's ledger, so a byte-level BPE trained here in seconds on the problems' own code is enough
   (drkernel.model.tokenizer; nothing committed, nothing downloaded);
2. `drkernel prepare-data` of the subset's files only (l1_20.parquet);
3. one Ray cluster (GPU included) that every `drkernel eval` joins with --address, so each chunk costs a verifier
   app, not a cluster start;
4. the evaluations round-robin, `--chunk` tasks at a time (eval-l1-20-reference-eager, -reference-compile,
   eval-library-fused): a finished chunk rewrites its report (report.json, report.md, fast_by_turn.png over every
   task done so far); a chunk starts only while the budget has room for it (the slowest chunk of that evaluation
   so far, or --first-chunk-s), and runs under a timeout of what is left, so the script ends within the budget;
   a chunk cut by the timeout keeps its finished tasks in records.jsonl (a rerun resumes them) but not in the
   report. summary.json and summary.md gather the reports and say what was cut;
5. `--resume-from` an earlier call's output (carried back as an ignored folder) continues where it stopped.

Tried on the 2-core CPU box at tiny scale (two KernelBench problems shrunk to 16 x 256, two library tasks):
    TRITON_INTERPRET=1 python benchmarks/h200_eval.py --kb KB_DIR --subset SUBSET --out /tmp/e --device cpu \
        --timing measured --budget-s 300 --chunk 2 --library-tasks relu,add
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUBSET = REPO / "benchmarks" / "kernelbench_l1_20.txt"
EVAL_FLAGS = ["--k", "1", "--turns", "1"]
# KEY=VALUE overrides are one positional list: they must all come last, after every flag
EVAL_OVERRIDES = [
    "rollout.max_new_tokens=16384",
    "rollout.max_context_tokens=32768",
    "verifier.options.timeout_s=300",  # a torch.compile reference compiles inside the evaluation
]


def subset_names(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def drkernel(*args: str) -> list[str]:
    """The CLI through this interpreter (the device has no console script)."""
    return [sys.executable, "-c", "import sys; from pipelines.cli import main; sys.exit(main())", *args]


def make_tokenizer(sources: list[Path], out: Path) -> Path:
    sys.path.insert(0, str(REPO))
    from drkernel.model.tokenizer import build_tokenizer

    if not (out / "tokenizer_config.json").is_file():
        build_tokenizer([p.read_text() for p in sources], vocab_size=2048, min_frequency=2).save_pretrained(out)
    return out


def kb_files(kb: Path, names: list[str]) -> list[Path]:
    missing = [n for n in names if not (kb / f"{n}.py").is_file()]
    if missing:
        raise SystemExit(f"--kb {kb} lacks {len(missing)} subset problems: {', '.join(missing[:5])}")
    return [kb / f"{n}.py" for n in names]


def resume(earlier: Path, out: Path, data: Path) -> None:
    """Copy an earlier call's eval folders (records.jsonl: `drkernel eval` skips the tasks they hold). Their
    run.json names the earlier call's parquet; it is pointed at this call's only when both hold the same rows."""
    import pyarrow.parquet as pq

    same_rows = (earlier / data.name).is_file() and pq.read_table(earlier / data.name).equals(pq.read_table(data))
    for folder in (f for f in earlier.glob("eval-*") if f.is_dir()):
        shutil.copytree(folder, out / folder.name, dirs_exist_ok=True)
        settings = json.loads((out / folder.name / "run.json").read_text())
        if settings.get("data") and same_rows:
            settings["data"] = str(data)
            (out / folder.name / "run.json").write_text(json.dumps(settings, indent=2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", required=True, help="KernelBench level1 folder (<id>_<Name>.py files)")
    ap.add_argument("--out", required=True, help="every file goes here ($OUT on the device)")
    ap.add_argument("--subset", default=str(SUBSET), help="file of problem names, one a line")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--budget-s", type=float, default=540.0, help="the whole script ends within this")
    ap.add_argument("--chunk", type=int, default=7, help="tasks per eval call")
    ap.add_argument("--first-chunk-s", type=float, default=60.0, help="room a chunk needs before one was timed")
    ap.add_argument("--library-tasks", default=None, help="library tasks for solution:fused (`a,b`; default all)")
    ap.add_argument("--timing", default="measured", help="verifier.options.timing (cpu: cpu_model)")
    ap.add_argument("--verifier-concurrency", type=int, default=1, help="evaluations at once (1: no shared timing)")
    ap.add_argument("--resume-from", default=None, help="an earlier call's --out: its finished tasks are kept")
    ap.add_argument("overrides", nargs="*", help="more KEY=VALUE overrides for every eval")
    a = ap.parse_args()
    t0 = time.monotonic()
    end = t0 + a.budget_s
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    names = subset_names(Path(a.subset))
    files = kb_files(Path(a.kb), names)
    tokenizer = make_tokenizer(files, out / "tokenizer")
    src = out / "l1_20_src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir()
    for f in files:
        shutil.copy(f, src / f.name)
    data = out / "l1_20.parquet"
    prep = [*drkernel("prepare-data", "--src", str(src), "--out", str(data), "--level", "1", "--force")]
    subprocess.run(prep, check=True, cwd=REPO)
    print(f"tokenizer and {data.name} in {time.monotonic() - t0:.0f} s", flush=True)
    if a.resume_from:
        resume(Path(a.resume_from), out, data)

    import ray

    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    address = ray.init(
        address="local", include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": path}}
    ).address_info["gcs_address"]
    common = [
        *("--config", "configs/demo_cpu.yaml", "--tokenizer", str(tokenizer), "--device", a.device),
        *("--address", address, "--limit", str(a.chunk), *EVAL_FLAGS),
    ]
    overrides = [
        *EVAL_OVERRIDES,
        f"verifier.options.timing={a.timing}",
        f"verifier.max_concurrency={a.verifier_concurrency}",
        *a.overrides,
    ]
    kb = ["--data", str(data), "--tasks", ",".join(names), "--policy", "reference"]
    library = ["--policy", "solution:fused", *(["--tasks", a.library_tasks] if a.library_tasks else [])]
    evals = {  # (flags, overrides of this eval)
        "eval-l1-20-reference-eager": ([*kb, "--reference", "eager"], ["verifier.options.require_triton=false"]),
        "eval-l1-20-reference-compile": ([*kb, "--reference", "compile"], ["verifier.options.require_triton=false"]),
        "eval-library-fused": (library, []),
    }
    state = {n: {"chunks": [], "complete": False, "cut": False, "summary": None} for n in evals}
    try:
        while True:
            ready = [n for n in evals if not state[n]["complete"] and not state[n]["cut"]]
            if not ready:
                break
            for name in ready:
                need = max(state[name]["chunks"], default=a.first_chunk_s)
                left = end - time.monotonic()
                if left < need:
                    state[name]["cut"] = True
                    print(f"{name}: no room for another chunk ({left:.0f} s left, one took up to {need:.0f} s)")
                    continue
                c0 = time.monotonic()
                flags, own = evals[name]
                cmd = drkernel("eval", *flags, "--out", str(out / name), *common, *own, *overrides)
                log = (out / f"{name}.log").open("a")
                try:
                    proc = subprocess.run(
                        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=log, text=True, timeout=left - 5
                    )
                except subprocess.TimeoutExpired:
                    state[name]["cut"] = True
                    print(f"{name}: chunk cut by the budget after {time.monotonic() - c0:.0f} s", flush=True)
                    continue
                state[name]["chunks"].append(round(time.monotonic() - c0, 1))
                if proc.returncode != 0:
                    state[name]["cut"] = True
                    print(f"{name}: eval exited {proc.returncode} (see {name}.log)", flush=True)
                    continue
                summary = json.loads(proc.stdout.strip().splitlines()[-1])
                state[name]["summary"] = summary
                state[name]["complete"] = bool(summary.get("complete"))
                print(
                    f"{name}: chunk in {state[name]['chunks'][-1]:.0f} s, {summary.get('tasks')} tasks done, "
                    f"complete {summary.get('complete')}",
                    flush=True,
                )
    finally:
        ray.shutdown()
    write_summary(out, state, time.monotonic() - t0)


def write_summary(out: Path, state: dict, wall: float) -> None:
    """summary.json (every eval's last report summary and chunk times) and a Markdown digest."""
    (out / "summary.json").write_text(json.dumps({"wall_s": round(wall, 1), "evals": state}, indent=2, default=str))
    lines = [
        f"whole script {wall:.0f} s",
        "",
        "| eval | tasks | complete | fast@0 | fast@1 | chunks (s) |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in state.items():
        summary = s["summary"] or {}
        best = summary.get("best", {})
        lines.append(
            f"| {name} | {summary.get('tasks', 0)} | {summary.get('complete', False)} | {best.get('fast@0', 'n/a')} | "
            f"{best.get('fast@1', 'n/a')} | {', '.join(str(c) for c in s['chunks'])} |"
        )
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
