"""The run's plots are readable: titled with the run's name, legends in words, rates on 0-1, the reward on the
range the reward function can give, correct rate per turn, and the speedup of correct kernels against 1x."""

from __future__ import annotations

import pytest

from drkernel.config.algorithm import RewardConfig
from drkernel.rl.rewards import reward_range
from drkernel.train.plots import draw, panels, write_plots

ROWS = [
    {
        "step": s,
        "rollout/reward_mean": 0.4 + 0.1 * s,
        "rollout/format_rate": 1.0,
        "rollout/compile_rate": 0.7,
        "rollout/correct_rate": 0.4,
        "rollout/fast1": 0.1,
        "rollout/correct_rate/turn1": 0.5,
        "rollout/correct_rate/turn2": 0.3,
        "rollout/speedup_correct_median": 0.8,
        "rollout/speedup_correct_best": 1.6,
        "staleness/max": 1.0,
        "staleness/mean": 0.5,
        "throughput/step_tokens_per_s": 90.0,
        "throughput/tokens_per_s": 100.0,
        "val/fast@0": 0.5,
        "val/fast@1": 0.25,
        "val/fast@1.2": 0.125,
    }
    for s in (1, 2, 3)
]


def _figures(rows, reward=(0.0, 2.5)):
    import matplotlib.pyplot as plt

    figs = {p.filename: draw(p, rows, "demo-run") for p in panels(reward, "modelled on the h200 profile")}
    yield {name: fig.axes[0] for name, fig in figs.items()}
    for fig in figs.values():
        plt.close(fig)


@pytest.fixture
def axes():
    yield from _figures(ROWS)


def _legend(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_every_panel_is_titled_and_its_legend_speaks_words(axes):
    assert set(axes) == {
        "reward.png",
        "rates.png",
        "turns.png",
        "speedup.png",
        "validation.png",
        "staleness.png",
        "throughput.png",
    }
    for name, ax in axes.items():
        assert ax.get_title().startswith("demo-run: "), name
        assert ax.get_xlabel() == "optimizer step" and ax.get_ylabel(), name
        labels = _legend(ax)
        assert labels and not any("/" in label for label in labels), (name, labels)  # no raw metric keys


def test_reward_axis_spans_the_reward_range_and_rates_span_0_to_1(axes):
    low, high = axes["reward.png"].get_ylim()
    assert low <= 0.0 and high >= 2.5  # a curve between 0.5 and 0.7 must not fill the frame
    for name in ("rates.png", "turns.png"):
        low, high = axes[name].get_ylim()
        assert low <= 0.0 and 1.0 <= high < 1.1, name
    assert reward_range(RewardConfig()) == (0.0, 2.5)
    assert reward_range(RewardConfig(kind="tiered")) == (-1.0, 1.0)
    assert reward_range(RewardConfig(kind="weighted")) == (0.0, 1.5)


def test_turns_speed_and_rates_show_what_they_say(axes):
    assert _legend(axes["turns.png"]) == ["turn 1", "turn 2"]
    assert _legend(axes["rates.png"]) == [
        "format (closed code block)",
        "compiled",
        "correct",
        "Fast@1 (faster, of correct)",
    ]
    speed = axes["speedup.png"]
    assert speed.get_yscale() == "log" and "modelled on the h200 profile" in speed.get_title()
    assert _legend(speed) == ["median of correct kernels", "best correct kernel", "1x: as fast as eager PyTorch"]
    assert _legend(axes["throughput.png"]) == ["this step", "average since RL started"]


def test_a_run_without_correct_kernels_says_so_and_files_are_pngs(tmp_path):
    rows = [{k: v for k, v in r.items() if "speedup" not in k} for r in ROWS]
    for ax in next(_figures(rows)).values():
        if ax.get_title().endswith("(modelled on the h200 profile)"):
            assert [t.get_text() for t in ax.texts] == ["no correct kernel yet"]
    written = write_plots(rows, tmp_path, "run")
    assert [p.name for p in written] == [p.filename for p in panels((0, 1), "x")]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)


def test_validation_draws_the_step_0_row_beside_the_training_steps():
    rows = [{"step": 0.0, "val/fast@0": 0.1, "val/fast@1": 0.0, "val/fast@1.2": 0.0}, *ROWS]
    ax = next(_figures(rows))["validation.png"]
    assert _legend(ax) == [
        "held-out: correct (fast@0, all samples)",
        "held-out: fast@1 (all samples)",
        "held-out: fast@1.2 (all samples)",
    ]
    assert list(ax.get_lines()[0].get_xdata()) == [0.0, 1.0, 2.0, 3.0]
    assert ax.get_ylim()[0] < 0 < 1 < ax.get_ylim()[1]
