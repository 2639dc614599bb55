"""Red team, issue 26: an honest kernel scored alone and with tests/verify/redteam/stall_reference.py appended (a
thread that SIGSTOPs the reference runner while it runs), interleaved in one Verifier, on a GPU. Prints each
verdict's speedup and reward side by side. Needs CUDA (on CPU the candidate finds no process of its uid).

    python benchmarks/redteam_stall_reference.py --rounds 2
"""

from __future__ import annotations

import argparse
from pathlib import Path

from drkernel.rl.rewards import score
from drkernel.verify import Verifier, VerifyOptions

HERE = Path(__file__).resolve().parents[1] / "tests" / "verify"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="pairs of (honest, stalled) evaluations")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    reference = (HERE / "candidates" / "ref_add_relu.py").read_text()
    honest = (HERE / "candidates" / "honest_add_relu.py").read_text()
    stall = (HERE / "redteam" / "stall_reference.py").read_text()
    options = VerifyOptions(device=args.device)
    with Verifier(device=args.device, max_concurrency=1) as verifier:
        print(f"device {verifier.device}, spares {verifier.spares}")
        for _ in range(args.rounds):
            for name, candidate in (("honest", honest), ("stalled", honest + "\n" + stall)):
                verifier.warm_spares(options)
                r = verifier._verify_ungated(reference, candidate, options)
                said = [line for line in r.details.get("candidate_stdout", "").splitlines() if "STALL" in line]
                print(
                    f"{name:8s} correct={r.correct} speedup={r.speedup} reward={score(r):.3f} "
                    f"cand_ms={r.runtime_ms} ref_ms={r.ref_runtime_ms} {said[:1]}"
                )


if __name__ == "__main__":
    main()
