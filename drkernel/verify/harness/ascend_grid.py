"""triton-ascend's launch limit, checked before a candidate's launch reaches an NPU (unverified on hardware).

triton-ascend runs every grid on one axis of AI-core blocks: its driver launches gridX * gridY * gridZ blocks
and packs that count into the low 16 bits of the launch's block-dim word (third_party/ascend/backend/driver.py
in triton-lang/triton-ascend; its tile generator caps programs at 65535 too). A launch with more programs does
not fail cleanly there, so the verifier refuses it first with an error naming the grid. It is the candidate's
fault, classified as a Triton compile failure (drkernel/verify/harness/runner.py), like triton-ascend's own
MLIRCompilationError.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

MAX_PROGRAMS = 65535


class AscendGridTooLarge(RuntimeError):
    """A launch of more programs than triton-ascend can address."""


def launch_grid(jit_obj: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> list[int]:
    """The launch's grid as Triton resolves it: a callable grid gets the bound arguments by name."""
    names = list(getattr(jit_obj, "arg_names", []))
    bound = dict(zip(names, args))
    bound.update({k: v for k, v in kwargs.items() if k in names})
    grid = kwargs.get("grid")
    if callable(grid):
        grid = grid(dict(bound))
    return [int(g) for g in (grid if isinstance(grid, (list, tuple)) else (grid,))]


def check_programs(grid: Sequence[int], limit: int = MAX_PROGRAMS) -> None:
    """Raise AscendGridTooLarge when the grid's programs (its product) exceed `limit`."""
    programs = math.prod(grid)
    if programs > limit:
        raise AscendGridTooLarge(
            f"grid {tuple(grid)} launches {programs} programs; triton-ascend runs at most {limit} per launch "
            "(all grid axes together): loop inside the kernel over more elements per program"
        )
