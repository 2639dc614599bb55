"""The job's verifier section is the `drkernel serve verifier` settings plus the job's own fields."""

from __future__ import annotations

import pytest

from drkernel.config.base import ConfigError, load_config
from drkernel.config.serve import VerifierServeConfig
from drkernel.config.train import TrainConfig


def test_the_serve_apps_settings_come_through_unchanged():
    cfg = load_config(
        TrainConfig,
        None,
        ["verifier.autoscaling.max_replicas=4", "verifier.device=auto", "verifier.accelerators_per_replica=0.5"],
    )
    serve_cfg = cfg.verifier.serve_config("cuda")
    assert isinstance(serve_cfg, VerifierServeConfig) and serve_cfg.autoscaling.max_replicas == 4
    assert serve_cfg.replica_actor_options() == {"num_cpus": 1.0, "num_gpus": 0.5}
    assert "app_name" not in serve_cfg.model_dump() and "options" not in serve_cfg.model_dump()


def test_the_old_fixed_replica_count_is_an_unknown_key():
    with pytest.raises(ConfigError, match="verifier.num_replicas: unknown key"):
        load_config(TrainConfig, None, ["verifier.num_replicas=2"])


def test_a_worker_may_not_queue_more_verifications_than_a_caller_may():
    with pytest.raises(ConfigError, match=r"8 verifications waiting.*max_queued_requests \(4\)"):
        load_config(
            TrainConfig,
            None,
            ["rollout.groups_per_worker=2", "rollout.samples_per_prompt=4", "verifier.max_queued_requests=4"],
        )


def test_prs_without_measured_coverage_is_refused():
    """Unmeasured coverage counts as 0 in PRS, which would take every correct turn out of the loss: the RL step
    would only ever push wrong answers down (the learning experiment's collapse, issue 24)."""
    with pytest.raises(ConfigError, match=r"algorithm.prs.*measure_coverage=false"):
        load_config(TrainConfig, None, ["verifier.options.measure_coverage=false"])
    cfg = load_config(TrainConfig, None, ["verifier.options.measure_coverage=false", "algorithm.prs.enabled=false"])
    assert not cfg.algorithm.prs.enabled
