"""A rollout's record: the turns of one episode and the trajectory that holds their tokens.

Token-level arrays of a trajectory are kept aligned by construction: `response_ids`, `response_mask` and
`response_logprobs` always have the same length, and each turn records the half-open span [start, end) of its
generated tokens in them (the feedback that follows is outside every span, with mask 0), so the trainer never
re-tokenises sampled text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from drkernel.types.sampling import FinishReason

EndReason = Literal["max_turns", "context_full", "correct_and_done", "format_error", "infra_error"]


@dataclass
class Turn:
    """One assistant turn and what the verifier made of it."""

    index: int  # 0-based turn number within the episode
    start: int  # first position of this turn's generated tokens in Trajectory.response_ids
    end: int  # one past the last generated token (feedback tokens that follow are not part of the turn)
    policy_version: int  # version of the policy that sampled the turn (the oldest one when a swap split it)
    finish_reason: FinishReason
    text: str  # the decoded response (for logs and samples only; training uses the ids)
    code: str | None  # the extracted kernel; None when the response had no closed code block
    verdict: dict[str, Any] | None = None  # VerifyResult.model_dump() when verified; None for a format failure
    reward: float = 0.0  # priced by drkernel.rl.rewards.score in the episode; meaningless when `masked`
    masked: bool = False  # True when the verifier gave no verdict (infra_error): never scored, never trained
    feedback: str | None = None  # the feedback message appended after this turn, if any
    newest_version: int | None = None  # newest version behind its tokens when a weight swap split it; else None

    @property
    def versions(self) -> tuple[int, int]:
        """(oldest, newest) policy version that sampled this turn's tokens."""
        return self.policy_version, self.policy_version if self.newest_version is None else self.newest_version

    @property
    def correct(self) -> bool:
        return bool(self.verdict and self.verdict.get("correct") and self.verdict.get("hack") is None)


@dataclass
class Trajectory:
    """One sample of one prompt group: the whole multi-turn token stream plus per-turn verdicts."""

    group_id: str  # unique per issued prompt group (same for the n samples of one prompt)
    sample_index: int  # 0..n-1 within the group
    task_uid: str  # the prompt row's uuid
    prompt_ids: list[int]  # the first-turn prompt, ending with the assistant header
    response_ids: list[int] = field(default_factory=list)  # everything after the prompt: turns and feedback
    response_mask: list[int] = field(default_factory=list)  # 1 = sampled by the policy (trained), 0 = feedback
    response_logprobs: list[float] = field(default_factory=list)  # rollout log-prob per token (0.0 where mask 0)
    turns: list[Turn] = field(default_factory=list)
    end_reason: EndReason | None = None
    metrics: dict[str, float] = field(default_factory=dict)  # e.g. generate_s, verify_s per episode

    @property
    def min_version(self) -> int:
        return min((t.policy_version for t in self.turns), default=-1)

    @property
    def max_version(self) -> int:
        return max((t.versions[1] for t in self.turns), default=-1)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.response_ids)

    def check_aligned(self) -> None:
        """Raise if the token arrays or turn spans disagree (a bug upstream, never silently trained on)."""
        n = len(self.response_ids)
        if len(self.response_mask) != n or len(self.response_logprobs) != n:
            raise ValueError(
                f"trajectory {self.group_id}/{self.sample_index}: ids {n}, mask "
                f"{len(self.response_mask)}, logprobs {len(self.response_logprobs)}"
            )
        last = 0
        for t in self.turns:
            if not (last <= t.start <= t.end <= n) or any(m != 1 for m in self.response_mask[t.start : t.end]):
                raise ValueError(f"trajectory {self.group_id}/{self.sample_index}: bad span of turn {t.index}")
            last = t.end
