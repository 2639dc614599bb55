"""The one message a child of an evaluation gets: frozen, typed, and the same after the fork-server's pickling."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from drkernel.config.verifier import VerifyOptions
from drkernel.verify.process.child_spec import CPU_PERF_TRIALS, CPU_WARMUP, ChildSpec, child_spec


def test_a_spec_is_frozen_and_survives_pickling():
    spec = child_spec("cpu", VerifyOptions(timing="cpu_model"), "/tmp/w/judge", ["add_kernel"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.workdir = "/elsewhere"  # type: ignore[misc]
    again = pickle.loads(pickle.dumps(spec))
    assert isinstance(again, ChildSpec) and again == spec and again.options.timing == "cpu_model"


def test_paths_live_in_the_childs_own_folder_and_kernels_are_a_tuple():
    spec = child_spec("cuda", VerifyOptions(entry_point="Net", memory_limit_mb=512), "/tmp/w/candidate", ["k1", "k2"])
    assert (spec.reference_path, spec.candidate_path) == (
        "/tmp/w/candidate/reference.py",
        "/tmp/w/candidate/candidate.py",
    )
    assert (spec.entry_point, spec.memory_limit_mb, spec.gate_kernels) == ("Net", 512, ("k1", "k2"))


def test_cpu_trial_counts_apply_only_where_the_caller_left_them_unset():
    unset = child_spec("cpu", VerifyOptions(), "/w", [])
    assert (unset.num_perf_trials, unset.num_warmup) == (CPU_PERF_TRIALS, CPU_WARMUP)
    asked = child_spec("cpu", VerifyOptions(num_perf_trials=30, num_warmup=3), "/w", [])
    assert (asked.num_perf_trials, asked.num_warmup) == (30, 3)
    gpu = child_spec("cuda", VerifyOptions(), "/w", [])
    assert (gpu.num_perf_trials, gpu.num_warmup) == (VerifyOptions().num_perf_trials, VerifyOptions().num_warmup)
