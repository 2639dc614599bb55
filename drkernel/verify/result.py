"""The verifier's "no verdict" signal: raised where a failure of the verifier's own side is found."""

from __future__ import annotations

from drkernel.types.verify_result import ErrorKind


class Infra(Exception):
    """No verdict possible (the reference, the judge, the fork-server or the harness failed): raised where that is
    found, turned into VerifyResult.infra where the verdict is made."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message
