"""Trajectories -> StepBatch: token alignment, masks, filter state, TRLOO and PRS on the real types."""

from __future__ import annotations

import json

import pytest
import torch
from trajectory_factory import TurnSpec, make_trajectory

from drkernel.config.algorithm import AlgorithmConfig, FilterConfig
from drkernel.config.base import load_config
from drkernel.config.tiny_recipe import tiny_recipe_overrides
from drkernel.config.train import TrainConfig
from drkernel.rl.filters import GroupVarianceFilter
from drkernel.rl.prs import prs_generator
from drkernel.rl.step_batch import (
    build_step_batch,
    filter_state_from_json,
    filter_state_to_json,
    generator_state_from_json,
    generator_state_to_json,
)
from drkernel.rl.trloo import trloo_advantages

PAD = 0
OK = dict(correct=True, reward=1.5, speedup=0.5, coverage=0.9)


def _filter(cfg: AlgorithmConfig, target: int = 1, n: int = 3) -> GroupVarianceFilter:
    return GroupVarianceFilter(cfg.filter, target_groups=target, group_size=n)


def _group(gid: str, specs: list[list[TurnSpec]]):
    return [make_trajectory(gid, i, turns) for i, turns in enumerate(specs)]


def _build(trajs, cfg=None, filt=None, max_turns=None):
    cfg = cfg or AlgorithmConfig()
    filt = filt or _filter(cfg, target=len({t.group_id for t in trajs}), n=3)
    return build_step_batch(trajs, cfg, PAD, filt, prs_generator(cfg.prs.seed), max_turns=max_turns)


def test_tokens_turns_and_advantages_line_up():
    trajs = _group(
        "a",
        [
            [TurnSpec(tokens=3), TurnSpec(tokens=2, **OK)],
            [TurnSpec(tokens=4, masked=True), TurnSpec(tokens=1)],  # infra error on turn 1: masked, never scored
            [TurnSpec(tokens=2, **OK)],  # ended after one turn
        ],
    )
    batch = _build(trajs)
    assert not batch.skipped and batch.num_rows == 3
    t0 = trajs[0]
    seq = t0.prompt_ids + t0.response_ids
    assert batch.input_ids[0, : len(seq)].tolist() == seq and batch.attention_mask[0].sum() == len(seq)
    # prompt -1, turn 0 (3 tokens), feedback -1 (2), turn 1 (2 tokens)
    assert batch.token_turn[0, : len(seq)].tolist() == [-1] * 4 + [0] * 3 + [-1] * 2 + [1] * 2
    assert batch.rollout_log_probs[0, 4:7].tolist() == [-1.0] * 3 and batch.rollout_log_probs[0, 7:9].eq(0).all()
    # the infra-masked turn is context but neither trained nor in the baselines
    assert batch.turn_mask.tolist() == [[True, True], [False, True], [True, False]]
    assert not batch.response_mask[1, 4:8].any() and batch.response_mask[1, 10]
    expected = trloo_advantages(batch.turn_rewards, batch.turn_mask, ["a"] * 3)
    assert torch.equal(batch.turn_advantages, expected)
    for row in range(3):
        for pos in range(batch.input_ids.shape[1]):
            slot = int(batch.token_turn[row, pos])
            want = float(expected[row, slot]) if slot >= 0 and batch.turn_mask[row, slot] else 0.0
            assert float(batch.advantages[row, pos]) == pytest.approx(want)
    # turn layout: row 0 turn 1 is positions 9, 10
    assert batch.turn_positions[0, 1, :2].tolist() == [9, 10] and batch.turn_position_mask[0, 1].sum() == 2
    assert torch.equal(batch.to_turns(batch.input_ids)[0, 1, :2], batch.input_ids[0, 9:11])


def test_meaningful_turn_rule_masks_a_regression():
    trajs = _group(
        "a", [[TurnSpec(**OK), TurnSpec(reward=0.0)], [TurnSpec(), TurnSpec(**OK)], [TurnSpec(), TurnSpec()]]
    )
    batch = _build(trajs)
    assert batch.turn_mask[0].tolist() == [True, False]  # correct, then a regression: masked, not punished
    assert batch.metrics["batch/meaningful_masked_fraction"] == pytest.approx(1 / 6)


def test_filter_reads_the_last_existing_turn_and_skips_constant_groups():
    cfg = AlgorithmConfig()
    # group b: every trajectory fails -> dropped; group a: early finishers differ only in their last real turn
    a = _group("a", [[TurnSpec(**OK)], [TurnSpec(), TurnSpec()], [TurnSpec(), TurnSpec()]])
    b = _group("b", [[TurnSpec(), TurnSpec()]] * 3)
    filt = _filter(cfg, target=1)
    batch = build_step_batch(a + b, cfg, PAD, filt, prs_generator(0))
    assert batch.group_ids == ["a"] * 3
    assert batch.metrics["filter/dropped_low_variance"] == 1.0
    # two groups needed, only one survives: skipped, survivor buffered, then trained with the next step's group
    filt2 = _filter(cfg, target=2)
    skipped = build_step_batch(a + b, cfg, PAD, filt2, prs_generator(0))
    assert skipped.skipped and skipped.num_rows == 0 and [g[0].group_id for g in filt2.buffered] == ["a"]
    state = json.loads(json.dumps(filter_state_to_json(filt2)))  # what a checkpoint stores
    resumed = _filter(cfg, target=2)
    filter_state_from_json(resumed, state)
    c = _group("c", [[TurnSpec(**OK)], [TurnSpec()], [TurnSpec()]])
    for f in (filt2, resumed):
        batch = build_step_batch(c, cfg, PAD, f, prs_generator(0))
        assert not batch.skipped and sorted(set(batch.group_ids)) == ["a", "c"]
        assert batch.input_ids.shape[0] == 6


def test_prs_rejects_a_lazy_correct_turn_but_keeps_it_in_the_baseline():
    lazy = dict(correct=True, reward=1.0, speedup=0.5, coverage=0.05)
    trajs = _group("a", [[TurnSpec(**lazy)], [TurnSpec(**OK)], [TurnSpec()]])
    batch = _build(trajs)
    assert batch.prs_keep[:, 0].tolist() == [False, True, True]
    assert batch.turn_mask[0, 0] and batch.turn_advantages[0, 0] != 0
    assert not batch.loss_turn_mask()[0].any() and batch.loss_turn_mask()[1].any()
    assert batch.metrics["prs/turn_rejected_fraction"] == pytest.approx(1 / 3)
    off = AlgorithmConfig.model_validate({"prs": {"enabled": False}})
    assert _build(trajs, cfg=off).prs_keep.all()


def test_the_tiny_recipe_trains_on_correct_turns_whose_coverage_it_never_measures(tmp_path):
    """The tiny recipe's verifier does not measure coverage; with PRS on, every correct turn left the loss and RL
    only pushed wrong answers down (issue 24's learning experiment)."""
    cfg = load_config(TrainConfig, None, tiny_recipe_overrides(tmp_path)).algorithm
    unmeasured = dict(correct=True, reward=1.0, speedup=1.0, coverage=None)
    trajs = _group("a", [[TurnSpec(**unmeasured)], [TurnSpec()], [TurnSpec()]])
    batch = _build(trajs, cfg=cfg)
    assert batch.turn_advantages[0, 0] > 0 and batch.loss_turn_mask()[0].any()
    assert batch.metrics["prs/turn_rejected_fraction"] == 0.0


def test_rollout_metrics_count_rates_fast1_and_hacks():
    trajs = _group(
        "a",
        [
            [TurnSpec(correct=True, reward=2.0, speedup=1.5, coverage=0.8), TurnSpec(formatted=False)],
            [TurnSpec(compiled=False), TurnSpec(correct=False, hack="decoy_kernel")],
            [TurnSpec(masked=True), TurnSpec(correct=True, reward=1.0, speedup=0.9, coverage=0.4)],
        ],
    )
    m = _build(trajs).metrics
    assert m["rollout/turns"] == 6 and m["rollout/infra_masked_turn_fraction"] == pytest.approx(1 / 6)
    assert m["rollout/format_rate"] == pytest.approx(4 / 5)
    assert m["rollout/compile_rate"] == pytest.approx(3 / 5)  # format failure and the compile error
    assert m["rollout/correct_rate"] == pytest.approx(2 / 5)
    assert m["rollout/fast1"] == pytest.approx(1 / 2) and m["rollout/fast1_in_all"] == pytest.approx(1 / 5)
    assert m["rollout/hack_rate/decoy_kernel"] == pytest.approx(1 / 5)
    assert m["rollout/coverage_mean"] == pytest.approx(0.6)
    assert m["rollout/reward_mean"] == pytest.approx(3.0 / 5)
    # per turn: first turns 1 correct of 2 scored (the masked one is not scored), second turns 1 of 3
    assert m["rollout/correct_rate/turn1"] == pytest.approx(1 / 2) and m["rollout/correct_rate/turn2"] == pytest.approx(
        1 / 3
    )
    assert m["rollout/speedup_correct_median"] == pytest.approx(1.2) and m["rollout/speedup_correct_best"] == 1.5
    none_correct = _build(_group("b", [[TurnSpec(correct=False)], [TurnSpec(compiled=False)], [TurnSpec()]])).metrics
    assert "rollout/speedup_correct_median" not in none_correct  # no correct kernel: no speed to report


def test_select_and_generator_state_round_trip():
    trajs = _group("a", [[TurnSpec(tokens=5, **OK)], [TurnSpec(tokens=2)], [TurnSpec(tokens=3)]])
    batch = _build(trajs)
    part = batch.select([1])
    assert part.input_ids.shape == (1, 4 + 2) and part.turn_positions.shape[-1] == 2
    assert part.sample_ids == [("a", 1)]
    g = prs_generator(3)
    torch.rand(4, generator=g)
    saved = generator_state_to_json(g)
    h = prs_generator(99)
    generator_state_from_json(h, saved)
    assert torch.equal(torch.rand(5, generator=g), torch.rand(5, generator=h))


def test_bad_trajectories_are_refused_by_name():
    good = _group("a", [[TurnSpec()], [TurnSpec()], [TurnSpec()]])
    with pytest.raises(ValueError, match="delivered twice"):
        _build(good + [make_trajectory("a", 0, [TurnSpec()])])
    broken = make_trajectory("b", 0, [TurnSpec()])
    broken.response_logprobs.pop()
    with pytest.raises(ValueError, match="b/0"):
        _build([broken])
    long = make_trajectory("c", 0, [TurnSpec(), TurnSpec(), TurnSpec()])
    with pytest.raises(ValueError, match="max_turns=2"):
        _build([long], max_turns=2)
    cfg = AlgorithmConfig(filter=FilterConfig(enabled=False))
    assert _build(good, cfg=cfg).num_rows == 3
