"""The kernel verifier: compile, check, time and profile a candidate against a reference."""

from drkernel.config.verifier import VerifyOptions
from drkernel.types.verify_result import CheckRecord, ErrorInfo, VerifyResult
from drkernel.verify.engine import Verifier, verify

__all__ = ["CheckRecord", "ErrorInfo", "Verifier", "VerifyOptions", "VerifyResult", "verify"]
