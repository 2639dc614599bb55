"""The tensors a reference selects indices from (argmax, top-k, sort, ...), for the comparison of index outputs.

An index output that differs from the reference's is accepted only where it selects values equal to those the
reference's index selects (drkernel.verify.judging.tensors.index_selection). When the reference selects from a tensor it
computed (argmax of logits), that tensor is not among the call's inputs: it is recovered here by running the
reference's forward once more under a dispatch mode that keeps what every selecting operator was given. Trusted
code only: the judge (which runs no candidate code) and the replay child, each on the reference model alone.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SELECTING = frozenset(
    {"argmax", "argmin", "topk", "max", "min", "sort", "argsort", "kthvalue", "mode", "median", "nanmedian"}
)
MAX_KEPT = 16  # selecting operators whose operand is kept, per forward


class SelectionCapture(TorchDispatchMode):
    """Keeps (a copy of) the floating operand of every selecting operator run while active: `sources`."""

    def __init__(self) -> None:
        super().__init__()
        self.sources: list[torch.Tensor] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = str(func._schema.name).removeprefix("aten::")
        first = args[0] if args else None
        if (
            name in SELECTING
            and isinstance(first, torch.Tensor)
            and first.is_floating_point()
            and len(self.sources) < MAX_KEPT
        ):
            self.sources.append(first.detach().clone())
        return out


def selection_sources(model: Any, inputs: list[Any]) -> list[torch.Tensor]:
    """The operands of the selecting operators of one reference forward on (copies of) `inputs`."""
    capture = SelectionCapture()
    copies = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    with torch.no_grad(), capture:
        model(*copies)
    return capture.sources
