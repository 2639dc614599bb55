"""False-forbidden rate of the static gate on honest kernels, and its catch rate on the attack files.

A false `forbidden` is reward 0 for honest work, so the allow-list is measured, not guessed. Sources:
the shipped task solutions, the benchmark's honest Triton candidates (benchmarks/candidate_set.py), the honest test
candidates, the examples, our kernels shaped like Triton's tutorials (benchmarks/tutorial_kernels.py; all must pass: a
rejection there is a false forbidden), and optionally sampled policy outputs
(`--samples DIR` of .py files, or a .jsonl/.parquet with a text column whose ```python blocks are
extracted), which are unverified and may hold real hacks, so their rejections are to be read (--show-rejected).
Prints one line per source and a total; `fails-anyway`
counts rejections whose every reason fails at run time too: jit-body rules compiled Triton enforces as well (names
tl lacks, nested defs, lambdas, Python inside a kernel), and names the source binds nowhere (a NameError).

    python benchmarks/gate_corpus.py [--samples PATH] [--show-rejected] [--verify]

--verify also runs each tutorial kernel through the library Verifier in both timing modes (CPU: Triton's
interpreter), so a false rejection by the trusted replay's rebuild (cpu_model) shows too.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import candidate_set  # noqa: E402
import tutorial_kernels  # noqa: E402

from drkernel.tasks import load_tasks  # noqa: E402
from drkernel.verify.static.gate import check_source  # noqa: E402

FAILS_ANYWAY = ("inside a @triton.jit body", "lambda inside", "is bound nowhere in the candidate")
CODE_BLOCK = re.compile(r"```(?:python|py)?\n(.*?)```", re.DOTALL)


def _files(pattern: str) -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text() for p in sorted(ROOT.glob(pattern))}


def honest_sources() -> dict[str, dict[str, str]]:
    """Source group -> {name: code}; every entry is honest work that must pass."""
    return {
        "task solutions": {f"{t.name}/{label}": s for t in load_tasks() for label, s in t.solutions.items()},
        "benchmarks/candidates (honest)": {
            **_files("benchmarks/candidates/*_triton.py"),
            **{str(c.path.relative_to(ROOT)): c.path.read_text() for c in candidate_set.honest()},
        },
        "tests/verify/candidates honest_*": _files("tests/verify/candidates/honest_*.py"),
        "examples": _files("examples/*/candidate.py"),
        "Triton tutorials (ours)": {name: cand for name, (_, cand) in tutorial_kernels.TUTORIALS.items()},
    }


def verify_tutorials() -> int:
    """Each tutorial kernel through the Verifier and score, measured and cpu_model; returns the false rejections."""
    from drkernel.rl.rewards import RewardConfig, score
    from drkernel.verify import VerifyOptions
    from drkernel.verify.engine import Verifier

    rejected = 0
    with Verifier(device="cpu", max_concurrency=1) as verifier:
        for timing in ("measured", "cpu_model"):
            options = VerifyOptions(device="cpu", timing=timing, num_correct_trials=2, timeout_s=600)
            for name, (reference, candidate) in tutorial_kernels.TUTORIALS.items():
                r = verifier.verify(reference, candidate, options)
                rejected += not r.correct
                why = "" if r.correct or not r.error else f" ({r.error.kind}: {r.error.message.strip()[:160]})"
                reward = score(r, RewardConfig())
                print(f"  {timing:9s} {name:18s} correct={r.correct} speedup={r.speedup} reward={reward}{why}")
    return rejected


def sampled_sources(path: Path) -> dict[str, str]:
    """Policy samples: .py files in a folder, or the last ```python block of each text in jsonl/parquet."""
    if path.is_dir():
        return {str(p): p.read_text() for p in sorted(path.rglob("*.py"))}
    if path.suffix == ".parquet":
        import pandas as pd

        rows = pd.read_parquet(path).to_dict("records")
    else:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    found = {}
    for i, row in enumerate(rows):
        text = next((str(row[k]) for k in ("response", "completion", "text", "output") if k in row), "")
        blocks = CODE_BLOCK.findall(text)
        if blocks:
            found[f"{path.name}#{i}"] = blocks[-1]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=Path, help="sampled policy outputs (folder of .py, .jsonl or .parquet)")
    parser.add_argument("--show-rejected", action="store_true", help="print each false forbidden with its reason")
    parser.add_argument("--verify", action="store_true", help="also run the tutorial kernels through the Verifier")
    args = parser.parse_args()
    groups = honest_sources()
    if args.samples:
        groups[f"policy samples ({args.samples})"] = sampled_sources(args.samples)
    total = rejected = 0
    t0 = time.perf_counter()
    print(f"{'source':44s} {'files':>6s} {'forbidden':>10s} {'fails-anyway':>13s} {'other':>6s}")
    for group, sources in groups.items():
        forbidden = fails_anyway = other = 0
        for name, code in sources.items():
            result = check_source(code)
            if result.kind == "forbidden":
                forbidden += 1
                # every violation fails at run time too: a jit-body rule compiled Triton enforces as well (nested
                # defs, lambdas, names tl lacks, non-jit helpers), or a name bound nowhere (reward 0 either way)
                fails_anyway += all(any(f in v for f in FAILS_ANYWAY) for v in result.violations)
                if args.show_rejected:
                    print(f"  FORBIDDEN {name}: {result.message}")
            elif not result.passed:
                other += 1  # syntax / no_triton in a policy sample: not the allow-list's doing
        total += len(sources)
        rejected += forbidden
        print(f"{group:44s} {len(sources):6d} {forbidden:10d} {fails_anyway:13d} {other:6d}")
    elapsed = time.perf_counter() - t0
    rate = rejected / total if total else 0.0
    print(
        f"total: {total} files, forbidden {rejected} ({rate:.1%}); gate {1000 * elapsed / max(total, 1):.2f}"
        " ms per file"
    )
    attacks = _files("tests/verify/candidates/gate_*.py")
    caught = sum(check_source(code).kind == "forbidden" for code in attacks.values())
    print(f"attack files (tests/verify/candidates/gate_*): {caught}/{len(attacks)} forbidden")
    if args.samples is None:
        print("policy samples: none given (pass --samples)")
    if args.verify:
        print("tutorial kernels through the Verifier (correct = not falsely rejected):")
        n = verify_tutorials()
        print(f"tutorial kernels falsely rejected: {n}/{2 * len(tutorial_kernels.TUTORIALS)} verifications")


if __name__ == "__main__":
    main()
