"""The verifier against a corpus of honest and adversarial candidates (real children, real Triton interpreter).

Every misbehaviour must come back as a verdict (status "ok", reward 0), never as an infra error, and
the same warm Verifier must evaluate an honest kernel cleanly right afterwards. Candidates live in
tests/verify/candidates/, one file per attack, each with a one-line docstring saying what it tries.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from drkernel.rl.rewards import score
from drkernel.verify import VerifyOptions
from drkernel.verify.engine import Verifier

pytestmark = pytest.mark.integration

CANDIDATES = Path(__file__).parent / "candidates"
ANY = object()  # "any value" marker for fields a case does not pin down
SLEEPER_ARGV = ["sleep", "417.25"]  # what sneaky_children.py leaves behind
ESCAPE_FILES = {
    "forbid_write_file": "/tmp/drkernel_escape_open.txt",
    "sneaky_write_file": "/tmp/drkernel_escape_save.pt",
}


@dataclass(frozen=True)
class Expect:
    """The verdict a correct verifier gives; ANY leaves a field free."""

    reference: str
    compiled: object
    correct: bool
    hack: object
    error: object  # an ErrorKind, None, or a tuple of acceptable kinds
    options: tuple[tuple[str, object], ...] = ()

    @property
    def honest(self) -> bool:
        return self.correct and self.hack is None


FORBIDDEN = dict(compiled=False, correct=False, hack="forbidden_api", error="forbidden")

CASES: dict[str, Expect] = {
    # honest kernels
    "honest_add_relu": Expect("ref_add_relu", True, True, None, None),
    "honest_softmax": Expect("ref_softmax", True, True, None, None),
    "honest_scale": Expect("ref_scale", True, True, None, None),
    "flood_stdout": Expect("ref_add_relu", True, True, None, None),
    # failure classes
    "fail_syntax": Expect("ref_add_relu", False, False, None, "syntax"),
    "fail_import": Expect("ref_add_relu", False, False, None, "import"),
    "fail_missing_model_new": Expect("ref_add_relu", False, False, None, "missing_model_new"),
    "fail_no_triton": Expect("ref_add_relu", False, False, None, "no_triton"),
    "fail_init": Expect("ref_add_relu", ANY, False, None, "init"),
    "fail_triton_compile": Expect("ref_add_relu", False, False, None, "triton_compile"),
    "fail_runtime": Expect("ref_add_relu", True, False, None, "runtime"),
    "fail_wrong_values": Expect("ref_add_relu", True, False, None, "output_mismatch"),
    "fail_wrong_shape": Expect("ref_add_relu", True, False, None, "output_mismatch"),
    "fail_wrong_dtype": Expect("ref_add_relu", True, False, None, "output_mismatch"),
    "fail_nan": Expect("ref_add_relu", True, False, None, "output_mismatch"),
    "fail_timeout": Expect("ref_add_relu", ANY, False, None, "timeout", (("timeout_s", 8.0),)),
    "fail_crash_oob": Expect("ref_add_relu", ANY, False, None, ("crash", "triton_compile")),  # the launch guard
    "fail_memory_hog": Expect("ref_add_relu", ANY, False, None, ("runtime", "crash"), (("memory_limit_mb", 3072),)),
    # forbidden APIs named in the source: the static gate
    "forbid_subprocess": Expect("ref_add_relu", **FORBIDDEN),
    "forbid_socket": Expect("ref_add_relu", **FORBIDDEN),
    "forbid_ctypes": Expect("ref_add_relu", **FORBIDDEN),
    "forbid_os_system": Expect("ref_add_relu", **FORBIDDEN),
    "forbid_threading": Expect("ref_add_relu", **FORBIDDEN),
    "forbid_cuda_stream": Expect("ref_add_relu", **FORBIDDEN),
    "forbid_patch_allclose": Expect("ref_add_relu", **FORBIDDEN),
    "forbid_patch_tensor_method": Expect("ref_add_relu", **FORBIDDEN),
    "forbid_write_file": Expect("ref_add_relu", **FORBIDDEN),
    "forbid_import_harness": Expect("ref_add_relu", **FORBIDDEN),
    "forbid_fork": Expect("ref_add_relu", **FORBIDDEN),
    # the same attacks through names the gate cannot see: the sandbox and the split processes hold
    "sneaky_write_file": Expect("ref_add_relu", True, False, None, "runtime"),
    "sneaky_connect": Expect("ref_add_relu", True, False, None, "runtime"),
    "sneaky_children": Expect("ref_add_relu", True, ANY, "side_process", ANY),  # a live child after forward
    "sneaky_orphan": Expect("ref_add_relu", True, ANY, "side_process", ANY),  # setsid + double fork
    "sneaky_tamper_allclose": Expect("ref_add_relu", True, False, ANY, ANY),
    "sneaky_import_hook": Expect("ref_add_relu", ANY, False, ANY, ANY),
    "sneaky_read_ref_output": Expect("ref_add_relu", True, False, None, "output_mismatch"),
    # runtime hacks
    "hack_decoy_torch": Expect("ref_add_relu", True, ANY, "decoy_kernel", ANY),
    "hack_decoy_first_call": Expect("ref_add_relu", True, ANY, "decoy_kernel", ANY),
    "hack_alias_input": Expect("ref_relu_rand", True, ANY, "output_aliases_input", ANY),
    "hack_alias_view": Expect("ref_relu_rand", True, ANY, "output_aliases_input", ANY),
    "hack_input_mutation": Expect("ref_add_relu", True, ANY, "input_mutation", ANY),
    "hack_result_cache": Expect("ref_add_relu", True, ANY, "result_caching", ANY),
    "hack_slow_reference": Expect("ref_add_relu", True, ANY, "harness_tampering", ANY),
    # correct for its first calls: re-validation after timing is what catches it
    "hack_drift": Expect("ref_add_relu", True, ANY, "result_caching", ANY),
}
# Candidates that the strict static gate rejects before anything runs: they go through the test-only
# `_verify_ungated` entry point, so each runtime layer (sandbox, split processes, evidence, judge) is
# shown to hold on its own. The gate's own verdicts on them are test_gate.py's business.
UNGATED = {name for name in CASES if name.startswith(("sneaky_", "hack_"))} | {"fail_import", "flood_stdout"}
GPU_ONLY = {"hack_side_stream": Expect("ref_add_relu", True, ANY, "side_stream", ANY)}

BASE_OPTIONS = dict(
    device="cpu", num_correct_trials=2, num_perf_trials=3, num_warmup=1, timeout_s=60.0, output_limit_bytes=4096
)


def read(name: str) -> str:
    return (CANDIDATES / f"{name}.py").read_text()


def options_for(expect: Expect, **over: object) -> VerifyOptions:
    return VerifyOptions(**{**BASE_OPTIONS, **dict(expect.options), **over})


def sleeper_pids() -> list[int]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if (p.info.get("cmdline") or []) == SLEEPER_ARGV:
            found.append(p.pid)
    return found


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def verifier():
    v = Verifier(device="cpu", max_concurrency=2)
    yield v
    v.close()


# multiprocessing's own helpers, shared by every Verifier of the process; they exit with it.
MP_INFRASTRUCTURE = ("multiprocessing.forkserver import main", "multiprocessing.resource_tracker import main")


def evaluation_processes() -> list[tuple[int, str]]:
    """Descendants of this test process other than multiprocessing's fork-server and resource tracker."""
    left = []
    for p in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
        except psutil.NoSuchProcess:
            continue
        # The session-wide Ray cluster (tests/conftest.py) also descends from this process when the whole suite
        # runs; its daemons and workers are not evaluation processes.
        if (
            not any(m in cmd for m in MP_INFRASTRUCTURE)
            and "/site-packages/ray/" not in cmd
            and not cmd.startswith("ray::")
        ):
            left.append((p.pid, cmd[:120]))
    return left


@pytest.fixture(scope="module", autouse=True)
def no_stray_processes(verifier):
    """After close(), no evaluation child (nor anything a candidate started under it) is alive."""
    yield
    verifier.close()
    deadline = time.monotonic() + 10
    while evaluation_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = evaluation_processes()
    assert not left, f"processes left after Verifier.close(): {left}"


def assert_honest_clean(verifier) -> None:
    """The survivor check: an honest kernel right after a bad one gets a clean, positive verdict."""
    r = verifier.verify(read("ref_add_relu"), read("honest_add_relu"), options_for(CASES["honest_add_relu"]))
    assert r.status == "ok", r.error
    assert r.compiled and r.correct and r.hack is None, r.model_dump_json(indent=1)
    assert score(r) > 0


def check_verdict(name: str, expect: Expect, r) -> None:
    dump = r.model_dump_json(indent=1, exclude={"checks"})
    assert r.status == "ok", f"{name}: a candidate's misbehaviour must be a verdict, not an infra error\n{dump}"
    if expect.compiled is not ANY:
        assert r.compiled is expect.compiled, dump
    if expect.correct is not ANY:
        assert r.correct is expect.correct, dump
    if expect.hack is not ANY:
        assert r.hack == expect.hack, dump
    if expect.error is None:
        assert r.error is None, dump
    elif expect.error is not ANY:
        kinds = expect.error if isinstance(expect.error, tuple) else (expect.error,)
        assert r.error is not None and r.error.kind in kinds, dump
        assert r.error.message.strip(), dump
    if expect.honest:
        assert score(r) > 0, dump
    else:
        assert score(r) == 0.0, dump


def open_listener() -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.5)
    return listener


def check_no_file_escaped(name: str, r) -> None:
    """Writes outside the private dir never land while the result reports the mount namespace active.

    Where the OS refuses namespaces the engine falls back; then the result must say so honestly.
    """
    path = ESCAPE_FILES[name]
    escaped = os.path.exists(path)
    if escaped:
        os.remove(path)
    if r.error is not None and r.error.kind == "forbidden":
        assert not escaped, f"{name} was rejected by the gate before any process ran, yet {path} exists"
        return
    isolation = r.details.get("isolation", {})
    namespaces = str(isolation.get("namespaces", "")) if isinstance(isolation, dict) else ""
    if namespaces.startswith("active"):
        assert not escaped, f"{name} wrote {path} although isolation reports {isolation!r}"
    else:
        assert namespaces, f"the result must report whether the mount namespace was active: {r.details!r}"


def check_no_connection(listener: socket.socket) -> None:
    try:
        conn, _ = listener.accept()
    except TimeoutError:
        return
    conn.close()
    pytest.fail("the candidate reached a loopback listener from inside its sandbox")


def check_no_sleepers(before: set[int]) -> None:
    deadline = time.monotonic() + 5
    left = [p for p in sleeper_pids() if p not in before]
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = [p for p in sleeper_pids() if p not in before]
    kill_pids(left)
    assert not left, f"candidate children survived the evaluation: {left}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_candidate_verdict(verifier, name: str) -> None:
    """Each candidate gets its verdict, side effects never escape, and the verifier stays clean."""
    expect = CASES[name]
    source = read(name)
    for path in ESCAPE_FILES.values():
        if os.path.exists(path):
            os.remove(path)
    before = set(sleeper_pids())
    listener = open_listener()
    try:
        source = source.replace("PORT = 0", f"PORT = {listener.getsockname()[1]}")
        run = verifier._verify_ungated if name in UNGATED else verifier.verify
        r = run(read(expect.reference), source, options_for(expect))
        check_no_connection(listener)
    finally:
        listener.close()
    check_no_sleepers(before)
    if name in ESCAPE_FILES:
        check_no_file_escaped(name, r)
    if name == "flood_stdout":
        assert len(r.model_dump_json()) < 64 * 1024, "captured output must be capped, not returned whole"
    check_verdict(name, expect, r)
    if not expect.honest:
        assert_honest_clean(verifier)


def test_concurrent_bad_and_honest(verifier) -> None:
    """With max_concurrency=2 a crashing candidate next to an honest one does not spoil its verdict."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [("fail_crash_oob", CASES["fail_crash_oob"]), ("honest_softmax", CASES["honest_softmax"])]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda j: verifier.verify(read(j[1].reference), read(j[0]), options_for(j[1])), jobs))
    for (name, expect), r in zip(jobs, results):
        check_verdict(name, expect, r)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(GPU_ONLY))
def test_gpu_only_hacks(name: str) -> None:
    """Side-stream work is invisible to events on the default stream: only a CUDA device shows it."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU; the AST-visible variant (forbid_cuda_stream) runs on CPU")
    expect = GPU_ONLY[name]
    v = Verifier(device="cuda", max_concurrency=1)
    try:
        r = v._verify_ungated(read(expect.reference), read(name), options_for(expect, device="cuda"))
    finally:
        v.close()
    check_verdict(name, expect, r)
