"""What the trainer did with each trajectory, from the real step batch and the real MRS/PRS masks."""

from __future__ import annotations

import math

import pytest
from trajectory_factory import TurnSpec, make_trajectory

from drkernel.config.algorithm import AlgorithmConfig
from drkernel.rl.filters import GroupVarianceFilter
from drkernel.rl.prs import prs_generator
from drkernel.rl.step_batch import build_step_batch
from drkernel.rl.update import loss_masks
from drkernel.train.decisions import merge_rank_decisions, row_decisions


def _step(stepped: bool = True) -> dict[tuple[str, int], dict]:
    cfg = AlgorithmConfig.model_validate({"filter": {"max_skip_steps": 0}})  # one survivor is trained, not held
    keep = [
        make_trajectory("keep", 0, [TurnSpec(reward=1.0, correct=True, coverage=0.0, speedup=1.2)]),  # PRS: c <= 0.3
        make_trajectory("keep", 1, [TurnSpec(reward=0.0)]),
        make_trajectory("keep", 2, [TurnSpec(masked=True)]),  # the verifier gave no verdict
        make_trajectory("keep", 3, [TurnSpec(reward=0.5, correct=True, coverage=1.0, speedup=1.1)]),
    ]
    flat = [make_trajectory("flat", i, [TurnSpec(reward=0.0)]) for i in range(4)]
    trajectories = keep + flat
    group_filter = GroupVarianceFilter(cfg.filter, target_groups=2, group_size=4)
    batch = build_step_batch(trajectories, cfg, 0, group_filter, prs_generator(0), max_turns=1)
    rollout = batch.to_turns(batch.rollout_log_probs)
    old = rollout.clone()
    old[batch.sample_ids.index(("keep", 3))] += 0.5  # the trainer disagrees with the engine on this row: MRS
    unrejected, loss_mask, _, _ = loss_masks(batch, old, cfg)
    masks = {"unrejected": unrejected, "loss_mask": loss_mask, "old_log_prob": old}
    rows = row_decisions(
        trajectories, [], batch, masks, stepped=stepped, min_std=cfg.filter.min_std, filter_enabled=True
    )
    assert len(rows) == len(trajectories)
    return {(r["group_id"], r["sample_index"]): r for r in rows}


def test_every_trajectory_gets_its_outcome_and_the_figure_behind_it():
    rows = _step()
    assert rows["keep", 1]["outcome"] == "trained" and rows["keep", 1]["turns"][0]["advantage"] < 0
    assert rows["keep", 0]["outcome"] == "rejected_prs" and rows["keep", 0]["turns"][0]["coverage"] == 0.0
    assert rows["keep", 2]["outcome"] == "masked_infra"
    assert rows["keep", 3]["outcome"] == "rejected_mrs"
    assert rows["keep", 3]["turns"][0]["ratio"] == pytest.approx(math.exp(0.5), rel=1e-5)
    for i in range(4):
        assert rows["flat", i]["outcome"] == "filtered" and rows["flat", i]["detail"] == "reward std 0 < min_std 0.001"


def test_a_step_that_did_not_happen_is_not_called_trained():
    assert _step(stepped=False)["keep", 1]["outcome"] == "not_stepped"


def test_ranks_merge_each_keeping_its_own_rows():
    filtered = {"group_id": "flat", "sample_index": 0, "outcome": "filtered", "detail": "d", "turns": []}
    rank0 = [filtered, {"group_id": "keep", "sample_index": 0, "outcome": "trained", "detail": "", "turns": []}]
    rank1 = [filtered, {"group_id": "keep", "sample_index": 1, "outcome": "rejected_mrs", "detail": "", "turns": []}]
    merged = merge_rank_decisions([rank0, rank1])
    assert sorted((r["group_id"], r["sample_index"], r["outcome"]) for r in merged) == [
        ("flat", 0, "filtered"),
        ("keep", 0, "trained"),
        ("keep", 1, "rejected_mrs"),
    ]


def test_a_turn_the_meaningful_turn_rule_leaves_out_is_named_so():
    cfg = AlgorithmConfig.model_validate({"filter": {"enabled": False}, "prs": {"enabled": False}})
    regressed = make_trajectory("g", 0, [TurnSpec(reward=1.0, correct=True), TurnSpec(reward=0.0)])
    plain = make_trajectory("g", 1, [TurnSpec(reward=0.0), TurnSpec(reward=0.0)])
    group_filter = GroupVarianceFilter(cfg.filter, target_groups=1, group_size=2)
    batch = build_step_batch([regressed, plain], cfg, 0, group_filter, prs_generator(0), max_turns=2)
    old = batch.to_turns(batch.rollout_log_probs)
    unrejected, loss_mask, _, _ = loss_masks(batch, old, cfg)
    masks = {"unrejected": unrejected, "loss_mask": loss_mask, "old_log_prob": old}
    rows = row_decisions([regressed, plain], [], batch, masks, stepped=True, min_std=0.0, filter_enabled=False)
    first = next(r for r in rows if r["sample_index"] == 0)
    assert first["outcome"] == "trained"
    assert [t["decision"] for t in first["turns"]] == ["trained", "not_counted"]  # a regression after a success
