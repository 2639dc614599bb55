"""Prompt groups on the wire: what a rollout worker is handed, and what it hands back.

A group id names one *issue* of one prompt row (`<task uuid>#e<epoch>p<position>`), so the same task in
two epochs gives two groups, while a group re-issued after its worker died keeps its id: the queue and
the prompt source use the id to make sure each issued group is trained at most once and never lost.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from drkernel.types.task_row import TaskRow
from drkernel.types.trajectory import Trajectory, Turn


def make_group_id(task_uid: str, epoch: int, position: int) -> str:
    """The id of the row at (epoch, position) of the prompt stream."""
    return f"{task_uid}#e{epoch}p{position}"


@dataclass
class PromptGroup:
    """One prompt row to be sampled n times; `issued_version` is the policy version when it was admitted."""

    group_id: str
    task: TaskRow
    issued_version: int

    def to_state(self) -> dict[str, Any]:
        return {"group_id": self.group_id, "task": self.task.to_record(), "issued_version": self.issued_version}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> PromptGroup:
        return cls(state["group_id"], TaskRow.model_validate(state["task"]), int(state["issued_version"]))


@dataclass
class FinishedGroup:
    """The n trajectories of one prompt group, stamped with the range of policy versions that sampled them.

    `ticket` is the admission slot the group ran under (see drkernel.rl.staleness); `worker_id` says who ran it.
    """

    group_id: str
    task_uid: str
    issued_version: int
    trajectories: list[Trajectory]
    ticket: int = -1
    worker_id: str = ""
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def min_version(self) -> int:
        """Oldest version behind any token; the admission version when no turn was sampled (it is a lower bound)."""
        versions = [t.min_version for t in self.trajectories if t.turns]
        return min(versions) if versions else self.issued_version

    @property
    def max_version(self) -> int:
        versions = [t.max_version for t in self.trajectories if t.turns]
        return max(versions) if versions else self.issued_version

    @classmethod
    def of(cls, group: PromptGroup, trajectories: list[Trajectory], ticket: int, worker_id: str) -> FinishedGroup:
        return cls(group.group_id, group.task.task_uuid, group.issued_version, trajectories, ticket, worker_id)

    def to_state(self) -> dict[str, Any]:
        """Plain data (for checkpoints): dataclasses become dicts."""
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> FinishedGroup:
        trajectories = []
        for raw in state["trajectories"]:
            fields = dict(raw)
            fields["turns"] = [Turn(**turn) for turn in fields.get("turns", [])]
            trajectories.append(Trajectory(**fields))
        rest = {k: v for k, v in state.items() if k != "trajectories"}
        return cls(trajectories=trajectories, **rest)
