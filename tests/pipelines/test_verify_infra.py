"""`drkernel verify` when the reference runner dies abruptly (as on the OOM killer's SIGKILL; it is pid 1 of its
own PID namespace, so it ends itself with os._exit): no verdict on the reference, an infra error, exit 1 with
the JSON verdict (it was exit 2, a usage error, with no JSON)."""

import json

import pytest
from test_verify_cli import EXAMPLE, drkernel


@pytest.mark.integration
def test_a_killed_reference_runner_is_an_infra_error_exit_1_with_json(tmp_path):
    ref = tmp_path / "ref.py"
    ref.write_text(
        (EXAMPLE / "reference.py")
        .read_text()
        .replace("        return a + b", "        import os\n        os._exit(137)")  # dies abruptly, as on SIGKILL
    )
    proc = drkernel(
        "verify", "--reference", str(ref), "--candidate", str(EXAMPLE / "candidate.py"), "--json", "--no-perf"
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    (line,) = proc.stdout.strip().splitlines()
    verdict = json.loads(line)
    assert verdict["status"] == "infra_error" and verdict["error"]["kind"] == "infra"
    assert "reference runner" in verdict["error"]["message"] and verdict["reward"] == 0.0
