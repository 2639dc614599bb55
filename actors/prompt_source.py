"""The prompt source: one actor owns the PromptStream and knows every group that is out with a worker.

Rollout workers ask it for the next group; the trajectory queue tells it when a group finished (or failed);
the rollout pool tells it when a worker died, and that worker's groups go back to the head of the line.
It is the single authority on "is this group done": `complete` answers True only for the first finished
copy of a group, so a group re-issued while its first worker was still delivering it is trained once.

Its state (stream cursor + groups issued and not finished) is saved in the same instant as the cursor, so a
resumed job re-issues exactly the groups that were out and continues the stream after the last issued row:
nothing is lost, nothing repeated. It is a plain (threaded, max_concurrency=1) actor: calls never
interleave, which is what makes every call atomic.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import ray
from pydantic import Field, model_validator

from actors.prompt_stream import TASKS_PER_CPU, PromptStream
from drkernel.config.base import StrictModel
from drkernel.train.stall import clip_error, dead_part
from drkernel.types.group import PromptGroup, make_group_id


class PromptSourceOptions(StrictModel):
    """How the prompt source reads its pool (the PromptStream's options); unknown keys are errors."""

    skip_invalid: bool = Field(False, description="drop rows that fail validation (counted) instead of failing")
    max_prompt_tokens: int | None = Field(
        None, ge=1, description="drop rows whose chat prompt has more tokens (needs tokenizer_path)"
    )
    tokenizer_path: str | None = Field(None, description="HF tokenizer folder that counts the prompt tokens")
    length_cache_dir: str | None = Field(None, description="where prompt lengths are cached (default: shared cache)")
    window_rows: int = Field(16384, ge=1, description="rows read per window of the shuffled epoch")
    head_rows: int = Field(4, ge=1, description="rows read at once where the cursor lands outside a prepared window")
    task_cpus: float = Field(1.0, gt=0, description="Ray CPUs of each prompt-read task")
    tasks_per_cpu: int = Field(TASKS_PER_CPU, ge=1, description="at most this many read tasks per cluster CPU")
    index_cache_dir: str | None = Field(None, description="where each file's validation verdict is kept")

    @model_validator(mode="after")
    def _length_filter_has_a_tokenizer(self) -> PromptSourceOptions:
        if self.max_prompt_tokens is not None and self.tokenizer_path is None:
            raise ValueError("max_prompt_tokens needs tokenizer_path (the tokenizer that counts the tokens)")
        return self


@ray.remote(num_cpus=0)
class PromptSource:
    """Hands out prompt groups with unique ids and takes back the groups of dead workers."""

    def __init__(
        self, path: str, seed: int = 0, num_epochs: int | None = None, options: PromptSourceOptions | None = None
    ):
        opts = options or PromptSourceOptions()
        if not isinstance(opts, PromptSourceOptions):
            raise TypeError(f"PromptSource takes PromptSourceOptions, got {type(opts).__name__}")
        stream_options = opts.model_dump(exclude={"tokenizer_path"})
        if opts.tokenizer_path is not None:
            from transformers import AutoTokenizer

            stream_options["tokenizer"] = AutoTokenizer.from_pretrained(opts.tokenizer_path)
        # One row per pull, so the cursor around each pull names the row's (epoch, position): its group id.
        self._stream = PromptStream(path, batch_size=1, seed=seed, num_epochs=num_epochs, **stream_options)
        self._outstanding: dict[str, PromptGroup] = {}  # issued, not finished, in issue order
        self._owner: dict[str, str | None] = {}  # group id -> worker running it (None: waiting to be re-issued)
        self._line: deque[str] = deque()  # re-issued groups, served before new rows
        self._exhausted = False
        self._counts = {"issued": 0, "reissued": 0, "completed": 0, "duplicates": 0, "failed": 0, "requeued": 0}
        self._failed: list[dict[str, str]] = []
        self._requeues: dict[str, int] = {}  # group id -> times it went back for infrastructure faults
        self._stop_reason: str | None = None  # set when a group met infrastructure faults past the limit

    def next_group(self, worker_id: str, issued_version: int) -> PromptGroup | None:
        """The next group for `worker_id` (re-issued ones first); None once the stream is exhausted."""
        if self._line:
            group_id = self._line.popleft()
            group = self._outstanding[group_id]
            group.issued_version = issued_version
            self._owner[group_id] = worker_id
            self._counts["reissued"] += 1
            return group
        if self._exhausted:
            return None
        before = self._stream.state_dict()
        rows = self._stream.next_batch()
        if not rows:
            self._exhausted = True
            return None
        after = self._stream.state_dict()
        # The row sits at the cursor before the pull, unless that cursor was parked at an epoch's end.
        if after["epoch"] != before["epoch"] and after["position"] > 0:
            epoch, position = after["epoch"], after["position"] - 1
        else:
            epoch, position = before["epoch"], before["position"]
        group = PromptGroup(make_group_id(rows[0].task_uuid, epoch, position), rows[0], issued_version)
        if group.group_id in self._outstanding:
            raise RuntimeError(f"prompt stream issued {group.group_id} twice; its cursor is inconsistent")
        self._outstanding[group.group_id] = group
        self._owner[group.group_id] = worker_id
        self._counts["issued"] += 1
        return group

    def _finish(self, group_id: str) -> bool:
        if self._outstanding.pop(group_id, None) is None:
            return False
        if self._owner.pop(group_id) is None:
            self._line.remove(group_id)
        return True

    def complete(self, group_id: str) -> bool:
        """Mark a group finished. True for its first finished copy; False for a duplicate or an unknown id."""
        first = self._finish(group_id)
        self._counts["completed" if first else "duplicates"] += 1
        return first

    def fail(self, group_id: str, error: str) -> bool:
        """A group whose samples failed past their retries: reported, not re-issued (a poison prompt must not
        loop forever). False if the group was already finished by another copy."""
        if not self._finish(group_id):
            return False
        self._counts["failed"] += 1
        self._failed.append({"group_id": group_id, "error": clip_error(error)})
        return True

    def requeue(self, group_id: str, error: str, limit: int) -> bool:
        """A group whose samples met only infrastructure faults was never judged: back to the end of the line.
        Past `limit` times the group fails and the source records why, for the job to stop on (the service is
        down, not the prompt); False then, or when another copy already finished it."""
        if self._owner.get(group_id, "") is None or group_id not in self._outstanding:
            return False
        self._requeues[group_id] = self._requeues.get(group_id, 0) + 1
        if self._requeues[group_id] > limit:
            part = dead_part(error)
            self._stop_reason = (
                f"group {group_id} failed for infrastructure reasons {self._requeues[group_id]} times "
                f"(rollout.infra_requeues={limit}); {f'the part that died: {part}; ' if part else ''}"
                f"last error: {clip_error(error, 1500)}"
            )
            self.fail(group_id, error)
            return False
        self._owner[group_id] = None
        self._line.append(group_id)
        self._counts["requeued"] += 1
        return True

    def stop_reason(self) -> str | None:
        """Why the job must stop (a group met infrastructure faults past its limit), or None."""
        return self._stop_reason

    def reissue(self, worker_id: str) -> list[str]:
        """Put every group of `worker_id` (dead or stopped) back at the head of the line, in issue order."""
        mine = [gid for gid in self._outstanding if self._owner[gid] == worker_id]
        for gid in mine:
            self._owner[gid] = None
        self._line.extendleft(reversed(mine))
        return mine

    def outstanding(self) -> dict[str, str | None]:
        """Group id -> worker running it (None while it waits to be re-issued)."""
        return dict(self._owner)

    def failed(self) -> list[dict[str, str]]:
        return list(self._failed)

    def metrics(self) -> dict[str, float]:
        """The pool's counts (rows, invalid rows dropped, prompts too long for the context) for the job's log."""
        return self._stream.metrics()

    def stats(self) -> dict[str, Any]:
        return {
            **self._counts,
            "outstanding": len(self._outstanding),
            "waiting_reissue": len(self._line),
            "stop_reason": self._stop_reason,
            "exhausted": self._exhausted,
            "cursor": self._stream.state_dict(),
        }

    def state_dict(self) -> dict[str, Any]:
        """Cursor and the groups out at this instant; on load they are re-issued first, in issue order."""
        return {
            "stream": self._stream.state_dict(),
            "outstanding": [group.to_state() for group in self._outstanding.values()],
            "counts": dict(self._counts),
            "failed": list(self._failed),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        missing = {"stream", "outstanding"} - set(state)
        if missing:
            raise ValueError(f"prompt source state lacks {sorted(missing)}")
        self._stream.load_state_dict(state["stream"])
        groups = [PromptGroup.from_state(raw) for raw in state["outstanding"]]
        self._outstanding = {group.group_id: group for group in groups}
        self._owner = dict.fromkeys(self._outstanding)
        self._line = deque(self._outstanding)
        self._exhausted = False
        self._counts = {**self._counts, **state.get("counts", {})}
        self._failed = list(state.get("failed", []))

    def close(self) -> None:
        """Release the stream's rows (a later pull reloads them)."""
        self._stream.close()
