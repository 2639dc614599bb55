"""Issue 8, seen #11: the library path from a script started outside the repository, with the package
reachable only through `sys.path.insert` in that script (no install, the checkout not on PYTHONPATH).

Python's fork-server ignores the caller's sys.path and swallows a failed preload; children then imported
torch after the harness snapshot and honest kernels read as harness tampering. The editable install of
this checkout is hidden from the child interpreter by a sitecustomize that drops its import finder, so
the script sees what a plain checkout on a GPU box sees.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "vector_add"

HIDE_EDITABLE = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path_hooks[:] = [h for h in sys.path_hooks if "__editable__" not in getattr(h, "__module__", "")]
for name in [m for m in sys.modules if m == "drkernel" or m.startswith("drkernel.")]:
    del sys.modules[name]
"""

SCRIPT = """
import json, sys
try:
    import drkernel  # noqa: F401
    sys.exit("drkernel is importable without the sys.path entry: the test would prove nothing")
except ImportError:
    pass
sys.path.insert(0, {repo!r})
from drkernel.verify import Verifier, VerifyOptions
from drkernel.rl.rewards import score
v = Verifier(device={device!r})
r = v.verify(open({ref!r}).read(), open({cand!r}).read(),
             VerifyOptions(device={device!r}, num_perf_trials=3, num_warmup=1, timeout_s=120))
print(json.dumps({{"server": v.server_info, "status": r.status, "correct": r.correct, "hack": r.hack,
                  "reward": score(r), "error": None if r.error is None else r.error.message,
                  "preloaded": r.details.get("isolation", {{}}).get("preloaded")}}))
"""


def run_outside_repo(tmp_path: Path, device: str) -> dict:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HIDE_EDITABLE)
    script = tmp_path / "use_verifier.py"
    script.write_text(
        SCRIPT.format(
            repo=str(REPO), device=device, ref=str(EXAMPLES / "reference.py"), cand=str(EXAMPLES / "candidate.py")
        )
    )
    # Only the checkout leaves the path: a site of carried packages (the GPU machine's Ray, ...) stays.
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != REPO]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *kept])}
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.integration
def test_library_path_from_outside_the_repository_cpu(tmp_path: Path) -> None:
    out = run_outside_repo(tmp_path, "cpu")
    assert out["server"]["preloaded"] is True and out["preloaded"] == "yes", out
    assert out["status"] == "ok" and out["correct"] and out["hack"] is None and out["reward"] > 0.5, out


@pytest.mark.gpu
@pytest.mark.integration
def test_library_path_from_outside_the_repository_cuda(tmp_path: Path) -> None:
    """The H200 report: `Verifier(device="cuda").verify(...)` from a script outside the checkout."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    out = run_outside_repo(tmp_path, "cuda")
    assert out["server"]["preloaded"] is True and out["preloaded"] == "yes", out
    assert out["status"] == "ok" and out["correct"] and out["hack"] is None and out["reward"] > 0.5, out
