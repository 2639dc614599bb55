"""Meaningful-turn mask and the group-variance filter with its bounded carry-over buffer."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from drkernel.config.algorithm import FilterConfig
from drkernel.rl.filters import GroupVarianceFilter, last_turn_rewards, meaningful_turn_mask


def test_meaningful_turn_mask_by_hand():
    r = torch.tensor(
        [
            [0.0, 1.0, 0.0],  # regression after a correct kernel: masked
            [0.0, 0.0, 0.0],  # never positive: every turn counts (negatives are signal)
            [1.0, -0.3, 2.0],  # dip masked, later improvement kept
            [-0.5, -0.3, 0.2],  # tiered rewards: negatives before any positive count
            [0.7, 0.0, 0.0],
        ]
    )
    mask = torch.ones(5, 3, dtype=torch.bool)
    mask[4, 0] = False  # an infra-error turn neither counts nor sets the running best
    expected = [[1, 1, 0], [1, 1, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]]
    assert meaningful_turn_mask(r, mask).int().tolist() == expected
    with pytest.raises(ValueError):
        meaningful_turn_mask(r, mask[:, :2])


def test_last_turn_rewards_zero_when_the_last_slot_does_not_count():
    r = torch.tensor([[0.0, 1.5], [2.0, 0.7]])
    mask = torch.tensor([[1, 1], [1, 0]], dtype=torch.bool)
    assert last_turn_rewards(r, mask).tolist() == [1.5, 0.0]


def _scores(*values):
    return [torch.tensor(v) for v in values]


VARIED = [0.0, 1.0, 0.5, 2.0]
FLAT = [1.0, 1.0, 1.0, 1.0]


def test_enough_groups_train_now_preferring_complete_ones_in_arrival_order():
    f = GroupVarianceFilter(FilterConfig(), target_groups=2, group_size=4)
    groups = ["flat", "partial", "full1", "full2", "full3"]
    out = f.step(groups, _scores(FLAT, [0.0, 1.0, 2.0], VARIED, VARIED, VARIED))
    assert not out.skipped and not out.forced
    assert len(out.train) == 2 and "partial" not in out.train and "flat" not in out.train
    assert out.train == sorted(out.train, key=groups.index)
    assert out.metrics["filter/dropped_low_variance"] == 1
    assert out.metrics["filter/discarded_excess"] == 2
    again = GroupVarianceFilter(FilterConfig(), target_groups=2, group_size=4)
    assert again.step(groups, _scores(FLAT, [0.0, 1.0, 2.0], VARIED, VARIED, VARIED)).train == out.train


def test_incomplete_groups_fill_remaining_slots_and_tiny_groups_are_dropped():
    f = GroupVarianceFilter(FilterConfig(), target_groups=2, group_size=4)
    out = f.step(["full", "partial", "tiny"], _scores(VARIED, [0.0, 1.0, 2.0], [0.0, 1.0]))
    assert out.train == ["full", "partial"]
    assert out.metrics["filter/dropped_small"] == 1  # 2 < 4 // 2 + 1


def test_too_few_survivors_skip_and_wait_in_the_buffer():
    f = GroupVarianceFilter(FilterConfig(), target_groups=2, group_size=4)
    first = f.step(["a", "flat"], _scores(VARIED, FLAT))
    assert first.skipped and first.train == [] and f.buffered == ["a"]
    second = f.step(["b"], _scores(VARIED))
    assert second.train == ["a", "b"] and f.buffered == [] and f.consecutive_skips == 0


def test_max_skip_steps_is_enforced_then_trains_on_what_survived():
    f = GroupVarianceFilter(FilterConfig(max_skip_steps=2), target_groups=3, group_size=4)
    assert f.step(["a"], _scores(VARIED)).skipped
    assert f.step(["b", "x"], _scores(VARIED, FLAT)).skipped
    forced = f.step(["y"], _scores(FLAT))
    assert forced.forced and not forced.skipped and forced.train == ["a", "b"]
    assert f.consecutive_skips == 0 and f.buffered == []
    # nothing survives at the bound: an empty step, and the count restarts
    f = GroupVarianceFilter(FilterConfig(max_skip_steps=1), target_groups=3, group_size=4)
    assert f.step(["x"], _scores(FLAT)).skipped
    empty = f.step(["y"], _scores(FLAT))
    assert empty.forced and empty.skipped and empty.train == []
    assert not f.step(["z"], _scores(FLAT)).forced  # an ordinary skip again
    assert f.step(["z"], _scores(FLAT)).forced


def test_buffer_capacity_evicts_the_oldest():
    f = GroupVarianceFilter(FilterConfig(max_buffer_groups=2), target_groups=10, group_size=4)
    out = f.step(["a", "b", "c"], _scores(VARIED, VARIED, VARIED))
    assert f.buffered == ["b", "c"] and out.metrics["filter/evicted"] == 1


def test_disabled_filter_passes_everything():
    f = GroupVarianceFilter(FilterConfig(enabled=False), target_groups=2, group_size=4)
    assert f.step(["flat", "one"], _scores(FLAT, [3.0])).train == ["flat", "one"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="score tensors"):
        GroupVarianceFilter(FilterConfig(), 2, 4).step(["a"], [])
    with pytest.raises(ValueError):
        GroupVarianceFilter(FilterConfig(), 0, 4)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 4),
    st.integers(1, 4),
    st.integers(0, 5),
    st.lists(st.lists(st.booleans(), min_size=0, max_size=4), min_size=1, max_size=12),
)
def test_never_more_consecutive_skips_than_the_bound(max_skip, target, cap, steps):
    """Each step brings groups that are varied (True) or flat (False)."""
    f = GroupVarianceFilter(FilterConfig(max_skip_steps=max_skip, max_buffer_groups=cap), target, 4)
    run = 0
    for step in steps:
        out = f.step([object() for _ in step], _scores(*[VARIED if v else FLAT for v in step]))
        assert len(out.train) <= target and len(f.buffered) <= cap
        run = run + 1 if out.skipped and not out.forced else 0
        assert run <= max_skip
        if out.forced:
            assert len(out.train) < target


def test_state_dict_resumes_buffer_skips_and_rng():
    cfg = FilterConfig()
    f = GroupVarianceFilter(cfg, target_groups=2, group_size=4)
    f.step(["a"], _scores(VARIED))
    resumed = GroupVarianceFilter(cfg, target_groups=2, group_size=4)
    resumed.load_state_dict(f.state_dict())
    assert resumed.buffered == ["a"] and resumed.consecutive_skips == 1
    nxt = (["b", "c", "d"], _scores(VARIED, VARIED, VARIED))
    assert resumed.step(*nxt).train == f.step(*nxt).train
