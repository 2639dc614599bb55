"""The evaluation's outputs: report.json (everything), report.md (tables a reader compares with the paper) and
fast_by_turn.png (fast@p of each turn alone and best so far, by turn)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def markdown(summary: dict[str, Any], title: str) -> str:
    ps = list(summary["best"])
    lines = [
        f"# {title}",
        "",
        f"{summary['tasks']} tasks, {summary['samples']} samples ({summary['samples_errored']} errored, counted as "
        f"failures), up to {summary['max_turns']} turns each. fast@p counts a sample when a correct, unflagged "
        f"kernel has {summary['comparison']}, over all samples.",
        "",
        "| turn | " + " | ".join(f"{p} (turn) | {p} (best so far)" for p in ps) + " |",
        "|---|" + "---|---|" * len(ps),
    ]
    for t, (alone, best) in enumerate(zip(summary["per_turn"], summary["best_by_turn"], strict=True), start=1):
        lines.append(f"| {t} | " + " | ".join(f"{alone[p]:.3f} | {best[p]:.3f}" for p in ps) + " |")
    lines += ["", "| metric | value |", "|---|---|"]
    for key in ("format_rate", "compile_rate", "correct_rate", "hack_rate", "reward_mean"):
        lines.append(f"| {key} (all turns) | {summary[key]:.3f} |")
    for key, value in summary["hack_rate_by_category"].items():
        lines.append(f"| hack_rate/{key} | {value:.3f} |")
    for key, value in summary["at_k"].items():
        lines.append(f"| {key} (unbiased) | {value:.3f} |")
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    turns = list(range(1, summary["max_turns"] + 1))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, p in enumerate(summary["best"]):
        color = f"C{i}"
        ax.plot(turns, [row[p] for row in summary["best_by_turn"]], "-o", color=color, label=f"{p}, best so far")
        ax.plot(turns, [row[p] for row in summary["per_turn"]], ":", color=color, label=f"{p}, this turn")
    ax.set_ylim(0, 1)
    ax.set_xlabel("turn")
    ax.set_ylabel("share of all samples")
    ax.set_xticks(turns)
    ax.set_title(f"{title}: fast@p by turn ({summary['samples']} samples)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_report(folder: Path, summary: dict[str, Any], settings: dict[str, Any], title: str) -> dict[str, Path]:
    """report.json, report.md and fast_by_turn.png in `folder`."""
    paths = {"json": folder / "report.json", "markdown": folder / "report.md", "png": folder / "fast_by_turn.png"}
    paths["json"].write_text(json.dumps({"settings": settings, "summary": summary}, indent=2, sort_keys=True))
    paths["markdown"].write_text(markdown(summary, title))
    plot(summary, paths["png"], title)
    return paths
