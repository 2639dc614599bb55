"""Config, request schemas and stats of the verifier app: pure pydantic/python, no Ray."""

import pytest
from pydantic import ValidationError

from drkernel.config.algorithm import RewardConfig
from drkernel.config.serve import AutoscalingSettings, VerifierServeConfig
from drkernel.types.verify_result import ErrorInfo, VerifyResult
from serve_apps.verifier_schemas import BatchRequest, BatchResponse, VerifyRequest, VerifyResponse
from serve_apps.verifier_stats import VerifierStats, percentile, verdict_of


def test_replica_owns_one_device_of_its_kind():
    assert VerifierServeConfig(device="cuda").replica_actor_options()["num_gpus"] == 1
    assert VerifierServeConfig(device="npu").replica_actor_options()["resources"] == {"NPU": 1}
    assert "num_gpus" not in VerifierServeConfig(device="cpu").replica_actor_options()


def test_config_rejects_unknown_and_inconsistent_keys():
    with pytest.raises(ValidationError, match="extra"):
        VerifierServeConfig.model_validate({"devcie": "cpu"})
    with pytest.raises(ValidationError, match="min_replicas"):
        AutoscalingSettings(min_replicas=3, max_replicas=2)
    with pytest.raises(ValidationError):
        VerifierServeConfig.model_validate({"device": "auto"})  # a replica owns a concrete device
    with pytest.raises(ValidationError, match="spares"):
        VerifierServeConfig.model_validate({"spares": -1})


def test_autoscaling_dict_is_what_serve_takes():
    from ray.serve.config import AutoscalingConfig

    d = AutoscalingSettings(min_replicas=1, max_replicas=4, target_ongoing_requests=3).to_serve()
    assert "initial_replicas" not in d
    cfg = AutoscalingConfig(**d)
    assert (cfg.min_replicas, cfg.max_replicas, cfg.target_ongoing_requests) == (1, 4, 3)


def test_request_schema_rejects_unknown_fields_and_sets_entry_point():
    req = VerifyRequest(reference_code="r", kernel_code="k", entry_point="Net")
    assert req.resolved_options().entry_point == "Net"
    with pytest.raises(ValidationError, match="extra"):
        VerifyRequest.model_validate({"reference_code": "r", "kernel_code": "k", "kernel": "x"})
    with pytest.raises(ValidationError, match="extra"):
        VerifyRequest.model_validate({"reference_code": "r", "kernel_code": "k", "options": {"trials": 3}})
    with pytest.raises(ValidationError, match="contradicts"):
        VerifyRequest.model_validate(
            {"reference_code": "r", "kernel_code": "k", "entry_point": "A", "options": {"entry_point": "B"}}
        )
    with pytest.raises(ValidationError):
        BatchRequest.model_validate({"items": []})


def test_verdict_labels():
    assert verdict_of(VerifyResult(correct=True, compiled=True)) == "correct"
    assert verdict_of(VerifyResult(correct=True, hack="decoy_kernel")) == "hack"
    assert verdict_of(VerifyResult(status="infra_error")) == "infra_error"
    assert verdict_of(VerifyResult(error=ErrorInfo(kind="timeout", message="t"))) == "timeout"
    assert verdict_of(VerifyResult()) == "incorrect"


def test_stats_percentiles_and_queue():
    assert percentile([], 50) is None
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 50) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 99) == 5.0
    s = VerifierStats(window=3)
    s.enter_queue(4)
    s.leave_queue(3)
    for i in range(5):
        s.record(VerifyResult(correct=True), cache_hit=i % 2 == 0, latency_s=float(i))
    snap = s.snapshot(queue_limit=10)
    assert snap["queue"] == {"depth": 1, "max_depth": 4, "limit": 10}
    assert snap["cache_hits"] == 3 and snap["evaluations"] == 5
    assert snap["latency_s"]["count"] == 3 and snap["latency_s"]["p50"] == 3.0


def test_client_shares_and_handle_reserve():
    cfg = VerifierServeConfig(
        autoscaling={"min_replicas": 1, "max_replicas": 2},
        max_ongoing_requests=4,
        queue_limit=24,
        max_batch=8,
        max_client_share=0.5,
        handle_reserve=0.25,
    )
    assert (cfg.dispatch_limit, cfg.client_dispatch_limit, cfg.client_admission_limit) == (6, 3, 12)
    with pytest.raises(ValidationError, match="max_batch"):
        VerifierServeConfig(queue_limit=24, max_batch=16, max_client_share=0.5)


def test_the_http_answer_is_the_verdict_priced_by_the_request_config():
    """Verdicts carry no reward (replicas cache them unpriced); the front prices each under its request's config."""
    verdict = VerifyResult(compiled=True, correct=True, speedup=2.0, coverage=1.0)
    assert "reward" not in verdict.model_dump()
    recipe = VerifyResponse.priced(verdict, VerifyRequest(reference_code="r", kernel_code="k").reward)
    tiered = VerifyResponse.priced(verdict, RewardConfig(kind="tiered"))
    assert recipe.reward == pytest.approx(0.5 + 0.5 * 2.0 + 0.5) and tiered.reward == pytest.approx(0.8)
    assert recipe.model_dump(exclude={"reward"}) == verdict.model_dump()
    infra = VerifyResult.infra("infra", "replica lost", "cpu")
    assert VerifyResponse.priced(infra, RewardConfig(kind="tiered")).reward == 0.0  # masked, never priced
    with pytest.raises(ValidationError, match="reward"):
        BatchResponse.model_validate({"results": [verdict.model_dump()]})  # an answer always shows its price


def test_a_verdict_recorded_with_a_reward_reads_back_without_it():
    """Records written before verdicts lost their price (checkpointed turns, old answers) still validate."""
    old = {**VerifyResult(compiled=True, correct=True).model_dump(mode="json"), "reward": 0.5}
    assert "reward" not in VerifyResult.model_validate(old).model_dump()
