"""Device kind + share -> Ray resources, and "auto" from the cluster's resources (pure; no Ray, no torch)."""

from __future__ import annotations

import pytest

from drkernel.config.serve import VerifierServeConfig
from drkernel.placement import PlacementError, ray_options, resolve_kind

CPU_HEAD_GPU_WORKER = {"CPU": 16.0, "GPU": 8.0, "memory": 1e11, "node:__internal_head__": 1.0}
ASCEND = {"CPU": 64.0, "NPU": 8.0}
CPU_ONLY = {"CPU": 4.0}


def test_auto_is_what_the_cluster_offers_not_what_the_driver_sees():
    assert resolve_kind("auto", CPU_HEAD_GPU_WORKER) == "cuda"
    assert resolve_kind("auto", ASCEND) == "npu"
    assert resolve_kind("auto", CPU_ONLY) == "cpu"
    assert resolve_kind("auto", {"CPU": 2.0, "GPU": 0.0}) == "cpu"
    assert resolve_kind("cuda", CPU_HEAD_GPU_WORKER) == "cuda"
    assert resolve_kind("cpu", CPU_HEAD_GPU_WORKER) == "cpu"


def test_a_device_the_cluster_lacks_is_refused_naming_the_role():
    with pytest.raises(PlacementError, match=r"trainer.device='cuda'.*no node .* GPU resource.*\['CPU'\]"):
        resolve_kind("cuda", CPU_ONLY, "trainer.device")
    with pytest.raises(PlacementError, match="NPU"):
        resolve_kind("npu", CPU_HEAD_GPU_WORKER)
    with pytest.raises(PlacementError, match="choose auto"):
        resolve_kind("tpu", CPU_ONLY)


def test_ray_options_per_kind_and_share():
    assert ray_options("cpu", 0.5) == {"num_cpus": 0.5}
    assert ray_options("cuda", 2.0) == {"num_cpus": 2.0, "num_gpus": 1.0}
    assert ray_options("cuda", 1.0, 0.25) == {"num_cpus": 1.0, "num_gpus": 0.25}
    assert ray_options("npu", 1.0, 0.5) == {"num_cpus": 1.0, "resources": {"NPU": 0.5}}
    with pytest.raises(PlacementError, match="resolved device kind"):
        ray_options("auto", 1.0)
    with pytest.raises(PlacementError, match=r"\(0, 1\]"):
        ray_options("cuda", 1.0, 1.5)


def test_the_verifier_app_asks_through_the_same_mapping():
    assert VerifierServeConfig(device="cuda").replica_actor_options() == {"num_cpus": 1.0, "num_gpus": 1.0}
    shared = VerifierServeConfig(device="npu", accelerators_per_replica=0.5, cpus_per_replica=2)
    assert shared.replica_actor_options() == {"num_cpus": 2.0, "resources": {"NPU": 0.5}}
