"""PNG plots of a run from its per-step metrics (the demo's picture of what happened)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PANELS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("reward.png", ("rollout/reward_mean",), "reward (mean over scored turns)"),
    ("correctness.png", ("rollout/compile_rate", "rollout/correct_rate", "rollout/fast1"), "fraction"),
    ("staleness.png", ("staleness/max", "staleness/mean"), "policy versions behind the trainer"),
    ("throughput.png", ("throughput/tokens_per_s",), "generated tokens per second"),
)


def write_plots(rows: list[dict[str, Any]], out_dir: str | Path) -> list[Path]:
    """One PNG per panel with every series the rows carry; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a CI box or a Ray worker
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, keys, ylabel in PANELS:
        fig, ax = plt.subplots(figsize=(5, 3.2), dpi=100)
        for key in keys:
            points = [(r["step"], r[key]) for r in rows if key in r]
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, ys, marker="o", label=key)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        fig.tight_layout()
        fig.savefig(out / filename)
        plt.close(fig)
        written.append(out / filename)
    return written
