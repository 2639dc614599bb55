"""Fitting the prompt reads into what the job's actors leave of the cluster, and the line that says what waits."""

from __future__ import annotations

import pytest

from drkernel.train.scheduling import ClusterTooSmall, describe_wait, fit_read_cpus
from drkernel.train.stall import clip_error, dead_part


def test_reads_get_what_is_left_down_to_the_floor_then_the_job_is_refused_naming_both_numbers():
    assert fit_read_cpus(16, 2.0, 1.0, 0.05) == 1.0  # room: the configured share
    assert fit_read_cpus(2, 1.75, 1.0, 0.05) == 0.25  # the demo's shares on a 2-CPU `ray start --head`
    assert fit_read_cpus(2, 1.95, 1.0, 0.05) == 0.05
    with pytest.raises(ClusterTooSmall, match=r"reserves 3.25 CPUs .* \(3.3 in all\), but the cluster has 2 CPUs"):
        fit_read_cpus(2, 3.25, 1.0, 0.05)
    with pytest.raises(ClusterTooSmall, match="the cluster has 0 CPUs"):
        fit_read_cpus(0, 0.0, 1.0, 0.05)  # a head of --num-cpus 0 and no worker yet


def test_the_wait_line_names_what_waits_what_is_free_and_what_the_job_asked():
    line = describe_wait(
        62.4,
        "deploying the verifier and policy Serve apps",
        [({"CPU": 0.5}, 1), ({"CPU": 1.0, "GPU": 1.0}, 2)],
        {"memory": 1e9, "node:__internal_head__": 1.0},
        {"CPU": 2.0, "memory": 2e9},
        {"1 policy replica(s)": {"CPU": 0.5}, "prompt reads, per task": {"CPU": 0.25}},
    )
    assert line == (
        "work has waited 62s for resources (phase: deploying the verifier and policy Serve apps): pending "
        "1 x {CPU: 0.5}, 2 x {CPU: 1, GPU: 1}; available {CPU: 0} of {CPU: 2}; this job requests: "
        "1 policy replica(s) {CPU: 0.5}; prompt reads, per task {CPU: 0.25}"
    )


def test_an_infra_error_keeps_the_part_that_died_at_its_head():
    error = (
        "ActorDiedError: The actor died unexpectedly before finishing this task.\n\tclass_name: "
        "ServeReplica:drkernel-train-verifier:Verifier\n\tactor_id: 1234\n" + "x" * 5000 + "\nkilled by the OOM killer"
    )
    clipped = clip_error(error, 1500)
    assert len(clipped) <= 1500 and clipped.startswith("ActorDiedError") and clipped.endswith("OOM killer")
    assert dead_part(clipped) == "ServeReplica:drkernel-train-verifier:Verifier"
    assert dead_part("TimeoutError: no reply") is None and clip_error("short") == "short"
