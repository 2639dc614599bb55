"""PNG plots of a run from its per-step metrics: what a user looks at after the demo or any training run.

Every figure is titled with the run's name, its legend uses words rather than metric keys, rates sit on 0-1, the
reward sits on the whole range the reward function can give (a curve from 0.4 to 0.7 must not fill the frame),
and speedups of correct kernels are drawn against the 1x line, saying whether they are modelled or measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

LABELS = {
    "rollout/reward_mean": "mean reward of scored turns",
    "rollout/format_rate": "format (closed code block)",
    "rollout/compile_rate": "compiled",
    "rollout/correct_rate": "correct",
    "rollout/fast1": "Fast@1 (faster, of correct)",
    "rollout/speedup_correct_median": "median of correct kernels",
    "rollout/speedup_correct_best": "best correct kernel",
    "staleness/max": "max versions behind",
    "staleness/mean": "mean versions behind",
    "throughput/step_tokens_per_s": "this step",
    "throughput/tokens_per_s": "average since RL started",
    "val/fast@0": "held-out: correct (fast@0, all samples)",
    "val/fast@1": "held-out: fast@1 (all samples)",
    "val/fast@1.2": "held-out: fast@1.2 (all samples)",
    "val/reward_mean": "held-out: mean reward of all turns",
}


@dataclass(frozen=True)
class Panel:
    """One figure: its file, title, y label, the metric keys it draws (a key ending in '*' is a prefix) and
    its y range (None: matplotlib's)."""

    filename: str
    title: str
    ylabel: str
    keys: tuple[str, ...]
    ylim: tuple[float, float] | None = None
    empty: str = "no data yet"


def panels(reward_range: tuple[float, float], speed_source: str) -> tuple[Panel, ...]:
    low, high = reward_range
    return (
        Panel("reward.png", "reward per step", "reward", ("rollout/reward_mean",), (low, high)),
        Panel(
            "rates.png",
            "what the policy wrote, per step (share of scored turns; Fast@1 of correct ones)",
            "fraction",
            ("rollout/format_rate", "rollout/compile_rate", "rollout/correct_rate", "rollout/fast1"),
            (0.0, 1.0),
        ),
        Panel(
            "turns.png",
            "correct rate by turn (does feedback help?)",
            "fraction",
            ("rollout/correct_rate/turn*",),
            (0.0, 1.0),
        ),
        Panel(
            "speedup.png",
            f"speedup of correct kernels over eager PyTorch ({speed_source})",
            "speedup (x, log scale)",
            ("rollout/speedup_correct_median", "rollout/speedup_correct_best"),
            empty="no correct kernel yet",
        ),
        Panel(
            "validation.png",
            "held-out tasks, best turn per sample (drkernel eval's fast@p over all samples)",
            "share of samples",
            ("val/fast@0", "val/fast@1", "val/fast@1.2"),
            (0.0, 1.0),
            empty="validation is off (validation.every_steps=0)",
        ),
        Panel("staleness.png", "policy lag of trained trajectories", "versions", ("staleness/max", "staleness/mean")),
        Panel(
            "throughput.png",
            "generated tokens per second",
            "tokens/s",
            ("throughput/step_tokens_per_s", "throughput/tokens_per_s"),
        ),
    )


def _label(key: str) -> str:
    if key.startswith("rollout/correct_rate/turn"):
        return f"turn {key.rsplit('turn', 1)[1]}"
    return LABELS.get(key, key)


def _series(rows: list[dict[str, Any]], pattern: str) -> dict[str, list[tuple[float, float]]]:
    keys = sorted({k for r in rows for k in r if k.startswith(pattern[:-1])}) if pattern.endswith("*") else [pattern]
    return {k: [(r["step"], r[k]) for r in rows if k in r] for k in keys}


def draw(panel: Panel, rows: list[dict[str, Any]], run_name: str) -> Any:
    """The matplotlib Figure of one panel (the caller saves and closes it)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a CI box or a Ray worker
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8), dpi=110)
    for pattern in panel.keys:
        for key, points in _series(rows, pattern).items():
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, ys, marker="o", label=_label(key))
    drawn = bool(ax.get_legend_handles_labels()[0])
    if panel.filename == "speedup.png" and drawn:
        ax.set_yscale("log")
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="1x: as fast as eager PyTorch")
    if panel.ylim is not None:
        pad = 0.03 * (panel.ylim[1] - panel.ylim[0])
        ax.set_ylim(panel.ylim[0] - pad, panel.ylim[1] + pad)
    steps = [r["step"] for r in rows]
    if steps:
        ax.set_xlim(min(steps) - 0.5, max(steps) + 0.5)
        ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title(f"{run_name}: {panel.title}", fontsize=9)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(panel.ylabel)
    ax.grid(alpha=0.3)
    if drawn:
        ax.legend(fontsize=8, loc="best")
    else:
        ax.text(0.5, 0.5, panel.empty, ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    return fig


def write_plots(
    rows: list[dict[str, Any]],
    out_dir: str | Path,
    run_name: str = "run",
    reward_range: tuple[float, float] = (0.0, 2.5),
    speed_source: str = "measured",
) -> list[Path]:
    """One PNG per panel with every series the rows carry; returns the files written."""
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for panel in panels(reward_range, speed_source):
        fig = draw(panel, rows, run_name)
        fig.savefig(out / panel.filename)
        plt.close(fig)
        written.append(out / panel.filename)
    return written
