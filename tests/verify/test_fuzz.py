"""Malformed sources get a clear error (kind + message), never an escaping traceback, never a hang.

Through the Python API (one shared CPU Verifier) and through the CLI (`python -m pipelines.cli verify`
in a subprocess: exit status, and stdout carrying exactly one JSON object).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from drkernel.rl.rewards import score
from drkernel.verify import VerifyOptions
from drkernel.verify.engine import Verifier

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = Path(__file__).parent / "candidates"
REF = (CANDIDATES / "ref_add_relu.py").read_text()
HONEST = (CANDIDATES / "honest_add_relu.py").read_text()
OPTIONS = dict(device="cpu", num_correct_trials=2, num_perf_trials=2, num_warmup=1, timeout_s=20.0)
FIVE_MB = 5 * 1024 * 1024


def _garbage(n: int) -> str:
    return random.Random(0).randbytes(n).decode("utf-8", errors="replace")


# (case id, candidate source, acceptable error kinds)
MALFORMED: list[tuple[str, str, tuple[str, ...]]] = [
    ("empty", "", ("no_triton",)),
    ("whitespace_only", "\n\n   \n\t\n", ("no_triton",)),
    ("binary_garbage", _garbage(4096), ("syntax",)),
    ("huge_garbage_5mb", _garbage(FIVE_MB), ("syntax",)),
    ("null_bytes", HONEST.replace("import torch\n", "import torch\x00\n", 1), ("syntax",)),
    ("non_utf8_surrogates", b"\xff\xfe\xfa".decode("utf-8", errors="surrogateescape") + HONEST, ("syntax",)),
    ("nested_parens_10k", "x = " + "(" * 10_000 + "1" + ")" * 10_000 + "\n" + HONEST, ("syntax",)),
    ("nested_lists_10k", "x = " + "[" * 10_000 + "]" * 10_000 + "\n" + HONEST, ("syntax",)),
    ("unary_not_chain_10k", "x = " + "not " * 10_000 + "1\n" + HONEST, ("syntax",)),
    ("unary_minus_chain_100k", "x = " + "-" * 100_000 + "1\n" + HONEST, ("syntax",)),
    ("binop_chain_100k", "x = " + "+".join(["1"] * 100_000) + "\n" + HONEST, ("syntax",)),
    ("attribute_chain_100k", "x = torch" + ".T" * 100_000 + "\n" + HONEST, ("syntax",)),
    (
        "nested_defs_100",
        "".join("    " * i + f"def f{i}():\n" for i in range(100)) + "    " * 100 + "pass\n" + HONEST,
        ("syntax",),
    ),
]


@pytest.fixture(scope="module")
def verifier():
    v = Verifier(device="cpu", max_concurrency=2)
    yield v
    v.close()


def _clear(r) -> None:
    assert r.error is not None, r.model_dump_json(indent=1)
    assert r.error.kind and r.error.message.strip()
    assert len(r.error.message) < 10_000, "error messages stay short"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case_id,source,kinds", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_candidate(verifier, case_id: str, source: str, kinds: tuple[str, ...]) -> None:
    t0 = time.monotonic()
    r = verifier.verify(REF, source, VerifyOptions(**OPTIONS))
    assert time.monotonic() - t0 < 60
    assert r.status == "ok", f"a malformed candidate is a verdict, not an infra error: {r.error}"
    _clear(r)
    assert r.error.kind in kinds, r.model_dump_json(indent=1, exclude={"checks"})
    assert not r.correct and score(r) == 0.0


def test_empty_source_without_triton_requirement(verifier) -> None:
    r = verifier.verify(REF, "", VerifyOptions(**OPTIONS, require_triton=False))
    assert r.status == "ok"
    _clear(r)
    assert r.error.kind == "missing_model_new" and score(r) == 0.0


@pytest.mark.timeout(120)
def test_huge_but_valid_source_is_judged(verifier) -> None:
    """An honest kernel carrying a 5 MB string literal is still evaluated on its merits."""
    source = HONEST + f'\n\nPADDING = "{"a" * FIVE_MB}"\n'
    r = verifier.verify(REF, source, VerifyOptions(**OPTIONS))
    assert r.status == "ok" and r.error is None, r.error
    assert r.correct and r.hack is None and score(r) > 0


# (case id, reference source, what the error message names)
BROKEN_REFERENCES = [
    ("syntax", REF.replace("def forward(self, x", "def forward(self x"), "failed to load: SyntaxError"),
    (
        "get_inputs_raises",
        REF.replace("return [torch.randn(4096), torch.randn(4096)]", "raise RuntimeError('no inputs')"),
        "get_inputs failed: RuntimeError: no inputs",
    ),
    ("no_model_class", REF.replace("class Model(", "class Modle("), "no attribute 'Model'"),
    ("empty", "", "no attribute 'get_init_inputs'"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case_id,reference,names", BROKEN_REFERENCES, ids=[c[0] for c in BROKEN_REFERENCES])
def test_broken_reference_is_not_a_candidate_verdict(verifier, case_id: str, reference: str, names: str) -> None:
    """A reference that cannot run leaves no verdict: infra_error (masked in training), never reward 0."""
    r = verifier.verify(reference, HONEST, VerifyOptions(**OPTIONS))
    assert r.status == "infra_error", r.model_dump_json(indent=1, exclude={"checks"})
    _clear(r)
    assert r.error.kind == "reference" and names in r.error.message, r.error
    assert verifier.verify(REF, HONEST, VerifyOptions(**OPTIONS)).correct, "the verifier survives a broken reference"


# -- the same through the CLI ----------------------------------------------------------------------


def _cli(tmp_path: Path, reference: bytes | str, candidate: bytes | str, *extra: str) -> subprocess.CompletedProcess:
    ref, cand = tmp_path / "ref.py", tmp_path / "cand.py"
    for path, data in ((ref, reference), (cand, candidate)):
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", errors="surrogateescape"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-m",
        "pipelines.cli",
        "verify",
        "--reference",
        str(ref),
        "--candidate",
        str(cand),
        "--device",
        "cpu",
        "--trials",
        "2",
        "--correct-trials",
        "2",
        "--timeout",
        "120",  # an evaluation's wall-clock budget: a loaded 2-core box (load 40-70) needs minutes, not seconds
        *extra,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)


def _one_json(stdout: str) -> dict:
    text = stdout.strip()
    assert text.count("\n") == 0, f"stdout must be exactly one JSON object, got {len(text.splitlines())} lines"
    return json.loads(text)


@pytest.mark.timeout(900)  # four CLI runs of up to 180 s each (a fresh fork-server per run)
def test_cli_verdicts_are_one_json_object(tmp_path: Path) -> None:
    """Honest, malformed and noisy candidates: exit 0 (a verdict) and one JSON object on stdout."""
    flood = (CANDIDATES / "flood_stdout.py").read_text()
    for candidate, check in (
        (HONEST, lambda d: d["correct"] and d["reward"] > 0),
        (_garbage(2048), lambda d: d["error"]["kind"] == "syntax"),
        (flood, lambda d: d["correct"]),
        ("x = " + "not " * 10_000 + "1\n" + HONEST, lambda d: d["error"]["kind"] == "syntax"),
    ):
        proc = _cli(tmp_path, REF, candidate, "--json")
        assert proc.returncode == 0, proc.stderr[-2000:]
        data = _one_json(proc.stdout)
        assert data["status"] == "ok" and check(data), data.get("error")


@pytest.mark.timeout(300)
def test_cli_usage_and_infra_exit_codes(tmp_path: Path) -> None:
    """Unreadable input: exit 2, one line on stderr and, with --json, one usage-error object on stdout (the
    README promises exactly one JSON object). Broken reference: exit 1 + JSON."""
    proc = _cli(tmp_path, REF, b"\xff\xfe not utf-8 \x80\x81", "--json")
    assert proc.returncode == 2 and _one_json(proc.stdout)["status"] == "usage_error"
    assert len(proc.stderr.strip().splitlines()) == 1 and "candidate" in proc.stderr

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.cli",
            "verify",
            "--reference",
            str(tmp_path / "nope.py"),
            "--candidate",
            str(tmp_path / "nope.py"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    assert proc.returncode == 2 and "not found" in proc.stderr and "Traceback" not in proc.stderr

    # A reference without Model is refused by the CLI before any process starts (issue 11 item 10): exit 2.
    proc = _cli(tmp_path, REF.replace("class Model(", "class Modle("), HONEST, "--json")
    assert proc.returncode == 2 and "no Model" in proc.stderr, proc.stderr[-2000:]
    assert _one_json(proc.stdout)["error"]["kind"] == "usage"
