"""The kernel verifier: compile, check, time and profile a candidate against a reference."""

from drkernel.config.verifier import VerifyOptions
from drkernel.verify.engine import Verifier, verify
from drkernel.verify.result import CheckRecord, ErrorInfo, VerifyResult

__all__ = ["CheckRecord", "ErrorInfo", "Verifier", "VerifyOptions", "VerifyResult", "verify"]
