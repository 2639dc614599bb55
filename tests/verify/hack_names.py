"""Hack and check names used by the tests, checked against the Literals of the verdict (drkernel.types.verify_result):
a renamed or removed hack fails the test that expects it, loudly, instead of comparing against a dead name."""

from __future__ import annotations

from typing import get_args

from drkernel.types.verify_result import CheckName, HackName

HACKS: frozenset[str] = frozenset(get_args(HackName))
CHECKS: frozenset[str] = frozenset(get_args(CheckName))


def hack(name: str) -> str:
    """`name`, after checking that the verifier can report it."""
    assert name in HACKS, f"{name!r} is not a HackName ({sorted(HACKS)})"
    return name


def check(name: str) -> str:
    """`name`, after checking that it is a CheckName."""
    assert name in CHECKS, f"{name!r} is not a CheckName ({sorted(CHECKS)})"
    return name
