"""Why the trainer gets no batch: the counts that explain a stall, read into one line a person can act on.

The job's loop polls the trajectory queue; when nothing arrives for `trainer.stall_warn_s` it logs this line
(and again every as long), and past `trainer.stall_limit_s` it stops with it. The causes it names are the
ones a stalled run has shown: every group finished is dropped as stale (a policy replica serving an old
version), groups fail or go back to the line (the verifier or a policy replica is down), no rollout worker
is alive, a Serve app is not running.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class FlowCounts:
    """Cumulative counts at one instant (queue, prompt source and pool), compared across a stall."""

    consumed: int = 0  # groups taken by the trainer (ever)
    dropped: int = 0  # dropped as stale
    failed: int = 0  # retired: failed past their retries, never trained
    requeued: int = 0  # back to the line after infrastructure faults
    running: int = 0  # admitted and being sampled now
    ready: int = 0  # finished, waiting for a batch
    workers: int = 0  # live rollout workers
    worker_deaths: int = 0


def diagnose_stall(before: FlowCounts, now: FlowCounts, waited_s: float, apps: Mapping[str, str]) -> str:
    """One line: how long the queue gave nothing, what changed meanwhile, and the likeliest cause.

    `apps`: this job's Serve apps by name -> status (RUNNING, DEPLOYING, UNHEALTHY, ...).
    """
    delta = {
        "consumed": now.consumed - before.consumed,
        "dropped_stale": now.dropped - before.dropped,
        "failed": now.failed - before.failed,
        "requeued_infra": now.requeued - before.requeued,
        "worker_deaths": now.worker_deaths - before.worker_deaths,
    }
    causes = []
    down = {name: status for name, status in apps.items() if status != "RUNNING"}
    if down:
        causes.append("Serve app(s) not running: " + ", ".join(f"{n} {s}" for n, s in sorted(down.items())))
    if now.workers == 0:
        causes.append("no rollout worker is alive")
    if delta["requeued_infra"] or delta["failed"]:
        causes.append(
            "groups fail (infrastructure faults send them back to the line; is the verifier or a policy replica down?)"
        )
    if delta["dropped_stale"] and not delta["consumed"]:
        causes.append("every finished group was dropped as stale (a policy replica serving an old version?)")
    if not causes and now.running and not any(delta.values()):
        causes.append("groups are being sampled but none finished (slow or hung generation or verification)")
    if not causes:
        causes.append("no group was admitted or finished")
    counts = " ".join(f"{k}={v}" for k, v in delta.items())
    return (
        f"no batch for {waited_s:.0f}s: {'; '.join(causes)} [in that time: {counts}; now running={now.running} "
        f"ready={now.ready} workers={now.workers}]"
    )


def clip_error(text: str, limit: int = 2000) -> str:
    """`text` within `limit` characters, keeping its head and its tail: the head holds the error's class and the
    part that died (Ray's `ActorDiedError ... class_name: ...`), the tail the last frames."""
    if len(text) <= limit:
        return text
    half = (limit - 40) // 2
    return f"{text[:half]} [... {len(text) - 2 * half} characters ...] {text[-half:]}"


def dead_part(text: str) -> str | None:
    """The actor or Serve replica an infrastructure error names (Ray's `class_name: ServeReplica:app:Verifier`)."""
    found = re.search(r"class_name:\s*([^\s,]+)", text) or re.search(r"actor_name:\s*([^\s,]+)", text)
    return found.group(1) if found else None
