"""Edges of the RL core that the mutation benchmark (benchmarks/mutation.py) found unguarded: boundaries,
error messages, defaults and the metrics the trainer logs. Each test names the slip it catches."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch

from drkernel.config.algorithm import FilterConfig, LossConfig, MRSConfig
from drkernel.rl.filters import GroupVarianceFilter, last_turn_rewards, meaningful_turn_mask
from drkernel.rl.loss import policy_loss
from drkernel.rl.mrs import mismatch_metrics, mismatch_rejection, rejection_fractions, rejection_keep_mask
from drkernel.rl.staleness import StalenessController
from drkernel.rl.trloo import rloo_last_turn_advantages, trloo_advantages, turn_advantages


# ---- trloo ----------------------------------------------------------------------------------------------------------
def test_input_errors_say_what_is_wrong():
    r, m = torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"must be \[N, T\], got shape \(6,\)"):
        trloo_advantages(r.reshape(-1), m.reshape(-1), ["a", "b"])
    with pytest.raises(ValueError, match="must be a float tensor, got torch.int64"):
        trloo_advantages(r.long(), m, ["a", "b"])
    with pytest.raises(ValueError, match="3 group ids for 2 trajectories"):
        trloo_advantages(r, m, ["a", "b", "c"])


def test_outcome_rloo_leaves_one_out_in_a_pair():
    """Two trajectories: each one's baseline is the other's outcome (last counted turn)."""
    r = torch.tensor([[0.0, 1.0, 0.0], [3.0, 0.0, 0.0]])
    m = torch.tensor([[True, True, False], [True, False, False]])
    adv = rloo_last_turn_advantages(r, m, ["g", "g"])
    assert adv.tolist() == [[-2.0, -2.0, 0.0], [2.0, 0.0, 0.0]]


def test_turn_advantages_dispatches_with_every_argument_and_gamma_1_by_default():
    r = torch.tensor([[1.0, 2.0], [0.0, 1.0], [5.0, 5.0]])
    m = torch.tensor([[True, True], [True, True], [True, False]])
    ids = ["a", "a", "b"]
    for name, fn in (("trloo", trloo_advantages), ("rloo_last_turn", rloo_last_turn_advantages)):
        assert torch.equal(turn_advantages(name, r, m, ids), fn(r, m, ids, 1.0))
        assert torch.equal(turn_advantages(name, r, m, ids, 0.5), fn(r, m, ids, 0.5))
    assert not torch.equal(turn_advantages("trloo", r, m, ids), trloo_advantages(r, m, ids, 0.5))


# ---- mrs ------------------------------------------------------------------------------------------------------------
def test_rejection_fractions_by_hand():
    """[2 traj, 2 turns, 2 tokens]: 6 valid tokens, 3 valid turns, 2 trajectories before."""
    before = torch.tensor([[[1, 1], [1, 0]], [[1, 1], [0, 0]]], dtype=torch.bool)
    after = torch.tensor([[[1, 0], [0, 0]], [[0, 0], [0, 0]]], dtype=torch.bool)
    assert rejection_fractions(before, after, "mrs") == {
        "mrs/token_rejected_fraction": 4 / 5,
        "mrs/turn_rejected_fraction": 2 / 3,
        "mrs/trajectory_rejected_fraction": 1 / 2,
    }
    nothing = torch.zeros_like(before)
    assert set(rejection_fractions(nothing, nothing, "x").values()) == {0.0}


def test_mismatch_rejection_reports_its_fractions_under_mrs():
    train = torch.zeros(1, 2, 2)
    rollout = torch.tensor([[[0.0, 0.0], [-1.0, 0.0]]])  # turn 1 ratio e^1: out of [0.999, 1.001]
    mask = torch.ones(1, 2, 2, dtype=torch.bool)
    out = mismatch_rejection(train, rollout, mask, MRSConfig(mode="turn", veto_threshold=None))
    assert out.response_mask.tolist() == [[[True, True], [False, False]]]
    assert out.metrics["mrs/turn_rejected_fraction"] == 0.5 and out.metrics["mrs/token_rejected_fraction"] == 0.5
    with pytest.raises(ValueError, match="must share a shape: \\(1, 2, 2\\), \\(1, 2, 1\\)"):
        mismatch_rejection(train, rollout[..., :1], mask, MRSConfig())
    with pytest.raises(ValueError, match="unknown MRS mode 'tokens'; choose from \\["):
        rejection_keep_mask(train, mask, "tokens", 0.9, 1.1)


def test_veto_is_strictly_below_the_threshold_and_counts_over_valid_turns():
    """exp(delta) exactly at the threshold survives; one valid turn vetoed is a fraction of 1, not 1/2."""
    cfg = MRSConfig(mode=None, veto_threshold=1e-4)
    at = torch.tensor([[[math.log(1e-4), 0.0]]], dtype=torch.float64)
    mask = torch.ones(1, 1, 2, dtype=torch.bool)
    assert mismatch_rejection(at, torch.zeros_like(at), mask, cfg).response_mask.all()
    below = at - 1e-6
    out = mismatch_rejection(below, torch.zeros_like(below), mask, cfg)
    assert not out.response_mask.any() and out.metrics["mrs/veto_turn_fraction"] == 1.0


def test_mismatch_metrics_ignore_empty_turns():
    """Per-sequence metrics (the max/min log-PPL gap) over valid turns only: an empty turn adds no 0."""
    train = torch.tensor([[[-1.0, -2.0], [0.0, 0.0]]])
    rollout = torch.tensor([[[-1.5, -2.0], [0.0, 0.0]]])
    mask = torch.tensor([[[True, True], [False, False]]])
    m = mismatch_metrics(train, rollout, mask)
    assert m["mismatch/log_ppl_diff_max"] == pytest.approx(-0.25)
    assert m == mismatch_metrics(train[:, :1], rollout[:, :1], mask[:, :1])


# ---- filters --------------------------------------------------------------------------------------------------------
def test_meaningful_turns_and_last_turn_rewards_beyond_two_slots():
    r = torch.tensor([[1.0, 0.5, 0.0], [0.0, 2.0, 3.0]])
    m = torch.tensor([[True, True, True], [True, True, False]])
    # a smaller positive reward after a positive turn still counts; only <= 0 regressions do not
    assert meaningful_turn_mask(r, m).tolist() == [[True, True, False], [True, True, False]]
    assert last_turn_rewards(r, m).tolist() == [0.0, 0.0]
    assert last_turn_rewards(r, torch.ones(2, 3, dtype=torch.bool)).tolist() == [0.0, 3.0]
    with pytest.raises(ValueError, match=r"must both be \[N, T\]: \(2, 3\)"):
        meaningful_turn_mask(r, m[:, :2])


def test_group_size_rules():
    GroupVarianceFilter(FilterConfig(), target_groups=1, group_size=1)  # one sample per prompt is legal
    with pytest.raises(ValueError, match="must be >= 1, got 0, 4"):
        GroupVarianceFilter(FilterConfig(), target_groups=0, group_size=4)
    assert GroupVarianceFilter(FilterConfig(min_group_size=3), 1, 8).min_group_size == 3
    # default n // 2 + 1 as an integer: 2 of 3 samples is enough
    f = GroupVarianceFilter(FilterConfig(), target_groups=1, group_size=3)
    step = f.step(["g"], [torch.tensor([0.0, 1.0])])
    assert step.train == ["g"] and step.skipped is False and step.forced is False


def test_variance_is_the_population_std_against_a_strict_bound():
    """[0, 1]: population std 0.5 (sample std 0.71). A std equal to min_std passes."""
    for min_std, passes in ((0.5, True), (0.6, False)):
        f = GroupVarianceFilter(FilterConfig(min_std=min_std, max_skip_steps=9), target_groups=1, group_size=2)
        assert f.step(["g"], [torch.tensor([0.0, 1.0], dtype=torch.float64)]).train == (["g"] if passes else [])


def test_partial_groups_only_fill_what_complete_ones_leave():
    """Target 2 with one complete and one partial survivor: both, each once, whatever the draw."""
    for seed in range(6):
        f = GroupVarianceFilter(FilterConfig(seed=seed), target_groups=2, group_size=4)
        step = f.step(["full", "part"], [torch.tensor([0.0, 1.0, 0.0, 1.0]), torch.tensor([0.0, 1.0, 1.0])])
        assert step.train == ["full", "part"]


def test_filter_metrics_of_a_skip_and_a_forced_step():
    f = GroupVarianceFilter(FilterConfig(max_skip_steps=1), target_groups=2, group_size=2)
    flat = torch.tensor([1.0, 1.0])
    skip = f.step(["a", "b", "c"], [flat, flat, torch.tensor([0.0, 1.0])])
    assert skip.skipped is True and skip.forced is False and skip.train == []
    assert skip.metrics == {
        "filter/pool_groups": 3.0,
        "filter/dropped_low_variance": 2.0,
        "filter/dropped_small": 0.0,
        "filter/survivors": 1.0,
        "filter/buffered": 1.0,
        "filter/evicted": 0.0,
        "filter/consecutive_skips": 1.0,
    }
    forced = f.step(["d"], [flat])
    assert forced.forced is True and forced.skipped is False and forced.train == ["c"]
    assert forced.metrics == {
        "filter/pool_groups": 2.0,
        "filter/dropped_low_variance": 1.0,
        "filter/dropped_small": 0.0,
        "filter/survivors": 1.0,
        "filter/forced_groups": 1.0,
    }


# ---- loss -----------------------------------------------------------------------------------------------------------
def _batch(rows: int = 4, length: int = 3, seed: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(rows, length, generator=g)
    old = logp + 0.1 * torch.randn(rows, length, generator=g)
    adv = torch.randn(rows, 1, generator=g).expand(rows, length)
    return logp, old, adv, torch.ones(rows, length, dtype=torch.bool)


def test_loss_errors_name_the_argument():
    logp, old, adv, mask = _batch()
    for name, kw in (
        ("old_log_prob", {"old_log_prob": old[:1]}),
        ("advantages", {"advantages": adv[:1]}),
        ("response_mask", {"response_mask": mask[:1]}),
    ):
        args = {"log_prob": logp, "old_log_prob": old, "advantages": adv, "response_mask": mask, **kw}
        with pytest.raises(ValueError, match=rf"^{name} shape \(1, 3\) != log_prob shape \(4, 3\)$"):
            policy_loss(cfg=LossConfig(), **args)
    with pytest.raises(ValueError, match=r"got shape \(12,\)"):
        policy_loss(logp.reshape(-1), old.reshape(-1), adv.reshape(-1), mask.reshape(-1), LossConfig())


def test_loss_metric_names():
    logp, old, adv, mask = _batch()
    kept = mask.clone()
    kept[0] = False
    _, m = policy_loss(
        logp, old, adv, kept, LossConfig(kl_coef=0.1), ref_log_prob=old, rollout_log_prob=old, unrejected_mask=mask
    )
    assert {
        "loss/pg_loss",
        "loss/clipfrac",
        "loss/clipfrac_dual",
        "loss/ppo_kl",
        "loss/kl_loss",
        "rejected/token_rejected_fraction",
        "mismatch/kl",
    } <= set(m)


def test_rows_layout_metrics_equal_the_turn_layout_and_use_the_unrejected_mask():
    """[rows, L] inputs get the same metrics as [rows, 1, L]; mismatch covers tokens PRS/MRS rejected."""
    logp, old, adv, mask = _batch()
    kept = mask.clone()
    kept[:2] = False
    rollout = torch.where(kept, old, old - 0.5)  # the engine disagreed only on the rejected rows
    _, flat = policy_loss(logp, old, adv, kept, LossConfig(), rollout_log_prob=rollout, unrejected_mask=mask)
    _, turns = policy_loss(
        *(x[:, None] for x in (logp, old, adv, kept)),
        LossConfig(),
        rollout_log_prob=rollout[:, None],
        unrejected_mask=mask[:, None],
    )
    assert flat == turns
    assert flat["mismatch/kl"] == pytest.approx(-0.25, abs=1e-6)  # mean of (rollout - train) over all 12 tokens
    assert flat["rejected/turn_rejected_fraction"] == 0.5
    _, none = policy_loss(logp, old, adv, kept, LossConfig(), rollout_log_prob=rollout)
    assert none["mismatch/kl"] == pytest.approx(0.0, abs=1e-6)  # no unrejected mask: the loss mask


def test_normalisers_with_one_row_or_one_token():
    """logp == old and A = 1: every token's loss is -1."""
    logp = torch.zeros(2, 3)
    adv = torch.ones(2, 3)
    one_row = torch.tensor([[True, True, False], [False, False, False]])
    loss, _ = policy_loss(logp, logp, adv, one_row, LossConfig(loss_agg_mode="seq-mean-token-sum"))
    assert loss.item() == pytest.approx(-2.0)
    one_token = torch.tensor([[False, True, False], [False, False, False]])
    loss, _ = policy_loss(logp, logp, adv, one_token, LossConfig(loss_agg_mode="token-mean"))
    assert loss.item() == pytest.approx(-1.0)


@pytest.mark.parametrize("mode", ["seq-mean-token-sum-norm", "token-mean"])
def test_data_parallel_counts_are_passed_to_verl(mode):
    """Rank 0 of 2 ranks with the global counts: the same loss as one rank holding half the batch."""
    logp, old, adv, mask = _batch(seed=3)
    cfg = LossConfig(loss_agg_mode=mode)
    alone, _ = policy_loss(logp, old, adv, mask, cfg)
    ranked, _ = policy_loss(logp, old, adv, mask, cfg, dp_size=2, global_batch_size=8, batch_num_tokens=24)
    assert ranked.item() == pytest.approx(alone.item(), rel=1e-6)


def test_dual_clip_bound_is_the_configured_one():
    """A = -1, ratio e^2: the dual clip caps the token's loss at c."""
    logp, old = torch.full((1, 1), 2.0), torch.zeros(1, 1)
    adv, mask = -torch.ones(1, 1), torch.ones(1, 1, dtype=torch.bool)
    for c in (2.0, 3.0):
        loss, _ = policy_loss(logp, old, adv, mask, LossConfig(clip_ratio_c=c, loss_agg_mode="token-mean"))
        assert loss.item() == pytest.approx(c)


# ---- staleness ------------------------------------------------------------------------------------------------------
@dataclass
class Group:
    group_id: str
    min_version: int


def test_is_stale_against_a_given_version():
    ctl = StalenessController(groups_per_step=1, max_staleness=1)
    assert not ctl.is_stale(0) and ctl.is_stale(0, version=2) and not ctl.is_stale(1, version=2)


def test_last_batch_by_hand():
    """steps_per_version 2, eta 1: a version-0 group may be in batches 0..3, version 1 in 0..5."""
    ctl = StalenessController(groups_per_step=1, max_staleness=1, steps_per_version=2)
    assert (ctl.last_batch(0), ctl.last_batch(1)) == (3, 5)
    admitted = [ctl.try_admit("w") for _ in range(2)]
    for a in admitted:
        ctl.accept(a.ticket, Group(f"g{a.ticket}", 0))
        ctl.take_batch(1)
    ctl.set_version(1)  # two batches trained, one push
    assert ctl.batches == 2 and (ctl.last_batch(0), ctl.last_batch(1)) == (3, 5)


def test_counters_lag_and_state_across_batches():
    ctl = StalenessController(groups_per_step=2, max_staleness=2)
    first = [ctl.try_admit("w") for _ in range(4)]
    ctl.release(first[3].ticket, "failed")
    ctl.release(first[2].ticket, "duplicate")
    ctl.accept(first[0].ticket, Group("a", 0))
    assert ctl.take_batch(1)[0] == [Group("a", 0)]
    ctl.set_version(2)
    ctl.accept(first[1].ticket, Group("b", 1))
    ctl.take_batch(1)
    waiting, running = ctl.try_admit("w"), ctl.try_admit("w")
    ctl.accept(waiting.ticket, Group("c", 1))
    stats = ctl.stats()
    assert stats == {
        "enqueued": 6,
        "running": 1,
        "accepted": 3,
        "consumed": 2,
        "dropped": 0,
        "failed": 1,
        "duplicates": 1,
        "unused": 0,
        "abandoned": 0,
        "version": 2,
        "batches": 2,
        "ready": 1,
        "capacity": 10 - 4,
        "budget": 10,
        "oldest_version_in_flight": 1,
        "max_lag_consumed": 1,
    }
    assert running.version == 2
    state = ctl.state_dict()
    assert state["max_lag_consumed"] == 1
    # running slots are re-issued, not restored; nothing ready or running: the oldest in flight is the version
    stats.update(running=0, capacity=7, ready=0, oldest_version_in_flight=2)
    restored = StalenessController(groups_per_step=2, max_staleness=2)
    restored.load_state_dict(state, [])
    assert restored.stats() == stats
    legacy = {k: v for k, v in state.items() if k not in ("max_lag_consumed", "counters")}
    restored.load_state_dict(legacy, [])  # a state saved before these fields existed
    assert restored.max_lag_consumed == 0 and set(restored.counters.values()) == {0}
    with pytest.raises(ValueError, match="invalid queue counters"):
        restored.load_state_dict({**state, "counters": {"bogus": 1}}, [])


def test_setting_the_same_version_again_is_allowed():
    ctl = StalenessController(groups_per_step=1, max_staleness=0)
    ctl.set_version(1)
    ctl.set_version(1)
    assert ctl.version == 1


def test_wait_serves_when_no_running_group_is_older_than_the_batch():
    """eta 0, two groups of version 0 running, one finished: serving it now is right (the other is as new)."""
    ctl = StalenessController(groups_per_step=2, max_staleness=0, on_violation="wait")
    a, b = ctl.try_admit("w"), ctl.try_admit("w")
    ctl.accept(b.ticket, Group("b", 0))
    batch, dropped = ctl.take_batch(1)
    assert [g.group_id for g in batch] == ["b"] and dropped == []
    assert [x.ticket for x in ctl.running_admissions()] == [a.ticket]


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_an_all_masked_batch_is_zero_in_every_aggregation(mode):
    logp, old, adv, mask = _batch()
    loss, _ = policy_loss(
        logp, old, adv, torch.zeros_like(mask), LossConfig(loss_agg_mode=mode, kl_coef=0.1), ref_log_prob=old
    )
    assert loss.item() == 0.0


def test_wait_serves_exactly_when_the_laggard_still_fits():
    """eta 2: serving a version-1 group at batch 1 leaves the running version-0 group batch 2, its last: serve."""
    ctl = StalenessController(groups_per_step=1, max_staleness=2, on_violation="wait")
    slow, fast = ctl.try_admit("w"), ctl.try_admit("w")
    ctl.accept(fast.ticket, Group("fast", 0))
    assert ctl.take_batch(1)[0] == [Group("fast", 0)]
    ctl.set_version(1)
    third = ctl.try_admit("w")
    ctl.accept(third.ticket, Group("third", 1))
    assert ctl.last_batch(0) == 2 and ctl.take_batch(1)[0] == [Group("third", 1)]
    assert [a.ticket for a in ctl.running_admissions()] == [slow.ticket]


def test_wait_compares_versions_not_arrival_order():
    """eta 0, three version-0 groups: the second finished one is served although an equally old one still runs."""
    ctl = StalenessController(groups_per_step=3, max_staleness=0, on_violation="wait")
    a, b, c = (ctl.try_admit("w") for _ in range(3))
    ctl.accept(b.ticket, Group("b", 0))
    ctl.accept(c.ticket, Group("c", 0))
    assert ctl.take_batch(1)[0] == [Group("b", 0)]
    assert ctl.take_batch(1)[0] == [Group("c", 0)]
    assert [x.ticket for x in ctl.running_admissions()] == [a.ticket]


def test_lag_is_version_minus_the_groups_own_min_version():
    ctl = StalenessController(groups_per_step=1, max_staleness=5)
    first, second = ctl.try_admit("w"), ctl.try_admit("w")
    ctl.accept(first.ticket, Group("a", 0))
    ctl.take_batch(1)
    ctl.set_version(4)
    ctl.accept(second.ticket, Group("b", 3))  # arrival 1, min_version 3
    ctl.take_batch(1)
    assert ctl.max_lag_consumed == 1
