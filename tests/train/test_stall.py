"""diagnose_stall names the cause a stalled run's counts point at, with the counts."""

from __future__ import annotations

from drkernel.train.stall import FlowCounts, diagnose_stall

RUNNING = {"drkernel-train-policy": "RUNNING", "drkernel-train-verifier": "RUNNING"}


def test_stale_drops_are_named_with_their_count():
    line = diagnose_stall(FlowCounts(dropped=2, workers=1), FlowCounts(dropped=9, running=2, workers=1), 65.0, RUNNING)
    assert line.startswith("no batch for 65s: every finished group was dropped as stale")
    assert "dropped_stale=7" in line and "consumed=0" in line and "workers=1" in line


def test_infra_faults_and_a_down_app_are_named():
    apps = {**RUNNING, "drkernel-train-verifier": "DEPLOYING"}
    line = diagnose_stall(FlowCounts(workers=2), FlowCounts(requeued=3, workers=2), 120.0, apps)
    assert "Serve app(s) not running: drkernel-train-verifier DEPLOYING" in line
    assert "infrastructure faults" in line and "requeued_infra=3" in line


def test_no_worker_and_a_hung_sample_are_told_apart():
    assert "no rollout worker is alive" in diagnose_stall(FlowCounts(), FlowCounts(), 30.0, RUNNING)
    hung = diagnose_stall(FlowCounts(running=2, workers=1), FlowCounts(running=2, workers=1), 30.0, RUNNING)
    assert "none finished" in hung and "no rollout worker" not in hung
