"""Red-team findings against the verifier (CPU, Triton interpreter, every sandbox layer active).

Each test asserts what a correct verifier does with an attack that earned reward without doing the work
(see README.md here). They fail today, so each is xfail(strict=True): the suite stays green and a test
turns into XPASS (a failure) once its hole is closed, which is the signal to drop the marker.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_layers import require_layers

from drkernel.rl.rewards import score
from drkernel.verify import VerifyOptions
from drkernel.verify.engine import Verifier
from drkernel.verify.process import protocol
from drkernel.verify.static.gate import check_source

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent
REPO = HERE.parents[2]
VECTOR_ADD_REF = (REPO / "examples" / "vector_add" / "reference.py").read_text()
MATMUL_REF = (HERE / "ref_matmul_1024.py").read_text()
OPTIONS = VerifyOptions(device="cpu", num_correct_trials=2, num_perf_trials=5)
GATE_HOLE = "the gate allows attribute paths from allowed modules into stdlib modules they import (issue 8 red team)"


def _src(name: str) -> str:
    return (HERE / name).read_text()


@pytest.fixture(scope="module")
def verifier():
    v = Verifier(device="cpu", max_concurrency=1)
    yield v
    v.close()


# Allowed modules re-export whole stdlib modules as attributes: each line reaches code execution, the
# harness modules, threads, native calls or files, and passes check_source today.
REEXPORTS = {
    "torch.builtins.exec": "import torch\ntorch.builtins.exec('x = 1')\n",
    "torch.os.system": "import torch\ntorch.os.system('true')\n",
    "torch.sys.modules": "import torch\nm = torch.sys.modules.get('os')\n",
    "torch.importlib": "import torch\nm = torch.importlib.import_module('os')\n",
    "torch.threading": "import torch\nt = torch.threading.Thread(target=print)\n",
    "torch.ctypes": "import torch\nlib = torch.ctypes.CDLL(None)\n",
    "torch.inspect": "import torch\nf = torch.inspect.currentframe()\n",
    "torch.serialization.pickle": "import torch\ntorch.serialization.pickle.loads(b'N.')\n",
    "torch.nn.functional.importlib": "import torch.nn.functional as F\nm = F.importlib.import_module('os')\n",
    "typing.sys": "import typing\nm = typing.sys.modules.get('os')\n",
    "torch.ops.import_module": "import torch\ntorch.ops.import_module('os')\n",
    "torch.from_file": "import torch\nx = torch.from_file('/etc/hostname', False, 4, dtype=torch.uint8)\n",
    "ndarray.tofile": "import torch\ntorch.zeros(2).numpy().tofile('/tmp/x')\n",
}


@pytest.mark.parametrize("name", sorted(REEXPORTS))
def test_gate_rejects_reexported_stdlib_modules(name: str) -> None:
    assert not check_source(REEXPORTS[name], require_triton=False).passed


def test_exec_defer_work_earns_nothing(verifier) -> None:
    r = verifier.verify(VECTOR_ADD_REF, _src("escape_exec_defer_work.py"), OPTIONS)
    assert r.status == "ok" and score(r) == 0.0, (score(r), r.speedup, r.coverage, r.hack)


def test_typing_sys_patch_earns_nothing(verifier) -> None:
    r = verifier.verify(MATMUL_REF, _src("escape_typing_sys_patch.py"), OPTIONS)
    assert r.status == "ok" and score(r) == 0.0, (score(r), r.speedup, r.coverage, r.hack)


# The same candidates with the static gate skipped: the runtime layers alone must hold ("nothing the
# candidate's process says is believed"), but "ran" is believed to mean the work is done, and coverage and
# evidence come from harness objects the candidate's code can replace in its own process.
@pytest.mark.parametrize(
    "name,reference", [("escape_exec_defer_work.py", VECTOR_ADD_REF), ("escape_typing_sys_patch.py", MATMUL_REF)]
)
def test_runtime_layers_catch_harness_rewrite(verifier, name: str, reference: str) -> None:
    r = verifier._verify_ungated(reference, _src(name), OPTIONS)
    # the findings were made with every layer active; on a host without one, say which, rather than pass
    require_layers(r.details.get("isolation", {}), "namespaces", "pid_namespace", "uid", "nproc_limit")
    assert r.status == "ok" and score(r) == 0.0, (score(r), r.speedup, r.coverage, r.hack)


@pytest.mark.parametrize(
    "header", [{"type": []}, {"type": {}}, {"type": "fault", "kind": [], "message": "", "detail": "", "phase": "run"}]
)
def test_unhashable_header_fields_are_protocol_errors(header: dict) -> None:
    with pytest.raises(protocol.ProtocolError):
        protocol.validate(header)


def test_malformed_frame_is_a_verdict_not_infra(verifier) -> None:
    r = verifier._verify_ungated(VECTOR_ADD_REF, _src("infra_mask_protocol.py"), OPTIONS)
    assert r.status == "ok" and score(r) == 0.0 and r.error is not None and r.error.kind == "protocol", r.error


def test_coverage_pass_cannot_be_told_apart(verifier) -> None:
    r = verifier.verify(MATMUL_REF, _src("coverage_pass_switch.py"), OPTIONS)
    assert r.status == "ok" and r.correct, r.error
    # The timed calls spend one interpreter launch (~2 ms) next to a 1024^3 torch.matmul in Triton.
    assert r.coverage is not None and r.coverage < 0.5, r.coverage
