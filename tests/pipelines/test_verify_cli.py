"""`drkernel verify` as a user runs it: a real subprocess, exit codes, stdout discipline."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "vector_add"


def drkernel(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    code = "import sys; from pipelines.cli import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.integration
def test_json_verdict_is_the_only_stdout_even_when_the_candidate_prints(tmp_path):
    noisy = tmp_path / "noisy.py"
    noisy.write_text(
        (EXAMPLE / "candidate.py")
        .read_text()
        .replace("        out = torch.empty_like(a)", "        print('NOISE to stdout'); out = torch.empty_like(a)")
    )
    proc = drkernel(
        "verify", "--reference", str(EXAMPLE / "reference.py"), "--candidate", str(noisy), "--json", "--trials", "2"
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    verdict = json.loads(lines[0])
    assert verdict["status"] == "ok" and verdict["compiled"] and verdict["correct"] and verdict["hack"] is None
    assert verdict["error"] is None and verdict["reward"] > 0.5
    for key in ("runtime_ms", "ref_runtime_ms", "speedup", "coverage"):
        assert isinstance(verdict[key], float)
    assert "NOISE" in verdict["details"]["candidate_stdout"]
    assert "NOISE" not in proc.stderr


@pytest.mark.integration
def test_failed_candidate_is_a_verdict_exit_0_and_human_report(tmp_path):
    wrong = tmp_path / "wrong.py"
    wrong.write_text((EXAMPLE / "candidate.py").read_text().replace("a + b, mask=mask", "a - b, mask=mask"))
    proc = drkernel("verify", "--reference", str(EXAMPLE / "reference.py"), "--candidate", str(wrong), "--trials", "1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("FAIL") and "output_mismatch" in proc.stdout


@pytest.mark.integration
def test_reference_that_fails_when_run_is_one_line_exit_2(tmp_path):
    """A reference that raises is the user's input at fault: one line naming it, exit 2, no traceback."""
    ref = tmp_path / "ref.py"
    ref.write_text((EXAMPLE / "reference.py").read_text() + "\nraise RuntimeError('broken reference')\n")
    proc = drkernel("verify", "--reference", str(ref), "--candidate", str(EXAMPLE / "candidate.py"), "--json")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "RuntimeError: broken reference" in lines[0] and "Traceback" not in proc.stderr
    assert "drkernel/verify" not in lines[0]  # no server-side paths
    (out,) = proc.stdout.splitlines()  # --json promised one JSON object on stdout: the usage error is that object
    assert json.loads(out) == {"status": "usage_error", "error": {"kind": "usage", "message": lines[0]}}


def test_usage_errors_with_json_print_one_json_object():
    for args in (["--candidate", "x.py"], ["--reference", "missing.py", "--candidate", "x.py"], ["--bogus"]):
        proc = drkernel("verify", "--json", *args, timeout=60)
        assert proc.returncode == 2, proc.stderr
        (out,) = proc.stdout.splitlines()
        verdict = json.loads(out)
        assert verdict["status"] == "usage_error" and verdict["error"]["message"] == proc.stderr.strip()


@pytest.mark.integration
def test_cpu_model_timing_and_what_the_reward_says_of_a_slower_correct_kernel(tmp_path):
    slow = tmp_path / "slow.py"  # correct, but launches the same kernel three times: modelled about 3x slower
    launch = "        add_kernel[(triton.cdiv(n, block),)](a, b, out, n, BLOCK=block)\n"
    slow.write_text((EXAMPLE / "candidate.py").read_text().replace(launch, launch * 3))
    proc = drkernel(
        "verify", "--reference", str(EXAMPLE / "reference.py"), "--candidate", str(slow), "--timing", "cpu_model"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("PASS") and "(cpu_model)" in proc.stdout, proc.stdout
    note = next(line for line in proc.stdout.splitlines() if line.startswith("reward: correct but slower"))
    speedup = float(re.search(r"speedup ([\d.]+)x", proc.stdout).group(1))
    assert speedup < 1 and f"({speedup:.3g}x)" in note and "beats any wrong kernel's 0" in note


@pytest.mark.parametrize(
    "source, needle",
    [
        (
            "import torch\nclass Model(torch.nn.Module):\n    pass\ndef get_init_inputs():\n    return []\n",
            "reference defines no get_inputs",
        ),
        ("import torch\ndef broken(:\n", "reference does not parse: invalid syntax (line 2)"),
    ],
)
def test_reference_without_get_inputs_or_not_parsing_is_one_line_exit_2(tmp_path, source, needle):
    ref = tmp_path / "ref.py"
    ref.write_text(source)
    proc = drkernel("verify", "--reference", str(ref), "--candidate", str(EXAMPLE / "candidate.py"), timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--reference", "missing.py", "--candidate", "examples/vector_add/candidate.py"], "not found"),
        (["--reference", "examples/vector_add/reference.py"], "--candidate"),
        (
            [
                "--reference",
                "examples/vector_add/reference.py",
                "--candidate",
                "examples/vector_add/candidate.py",
                "--device",
                "tpu",
            ],
            "--device",
        ),
        (
            [
                "--reference",
                "examples/vector_add/reference.py",
                "--candidate",
                "examples/vector_add/candidate.py",
                "--atol",
                "-1",
            ],
            "atol",
        ),
        (
            [
                "--reference",
                "examples/vector_add/reference.py",
                "--candidate",
                "examples/vector_add/candidate.py",
                "--bogus",
            ],
            "--bogus",
        ),
    ],
)
def test_usage_errors_are_one_line_exit_2(args, needle):
    proc = drkernel("verify", *args, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr
