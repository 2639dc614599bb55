"""Each fork-server runs Triton in its own mode whatever the caller's environment.

Found on the H200: a test module that set TRITON_INTERPRET=1 in the pytest process (as the CPU replay does)
made the compiler-mode fork-server import Triton as an interpreter, and every honest GPU kernel then failed its
correctness check. A user's shell could do the same to a GPU verifier.
"""

from __future__ import annotations

import os

import pytest

from drkernel.verify import Verifier


@pytest.mark.integration
def test_compiler_mode_server_ignores_the_callers_interpreter_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with Verifier(device="cpu", max_concurrency=1) as v:
        assert v.server_info["interpret"] is True
        v._probe(interpret=False)  # raises PreloadFailed when the server imported Triton in the wrong mode
        assert v.server_info["interpret"] is False and v.server_info["preloaded"] is True
    assert os.environ["TRITON_INTERPRET"] == "1"  # the caller's environment is left as it was
