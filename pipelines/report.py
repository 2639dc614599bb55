"""`drkernel report RUN_FOLDER`: one self-contained report.html of a training run or of a `drkernel eval` folder.

    drkernel report RUN_FOLDER [--out FILE]

The job writes it at its end, when it fails, stalls or is stopped, and when it is resumed; `drkernel demo` and
`drkernel eval` write it too. One file: inline CSS, JS and plots (PNG as data URIs), no server and no network (a
Content-Security-Policy forbids every fetch). It holds the run's status, config digest and settings, the per-step
table and plots, and a trajectory browser over outcomes.jsonl and samples.jsonl: filters by step, task, turn,
verdict category (correct, wrong, compile error, format failure, each hack, infra) and outcome (trained, filtered,
rejected by MRS or PRS, masked as infra, dropped as stale and why), sorting by reward or speedup; a sample shows
each turn's prompt excerpt, the kernel highlighted and diffed against the previous turn, the feedback the policy
saw, the verdict and the reward.

The data sits in a `<script type="application/json">` block with `<`, `>` and `&` escaped, and the page builds
every element from it with `textContent`: a kernel holding `</script>` or HTML is shown as text, never run.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pipelines.cli import UsageError

MAX_OUTCOMES = 100_000  # trajectory rows a page holds (the latest): beyond that the page would be too heavy to open
PAGE = Path(__file__).with_name("report_page.html")  # the page: CSS, the browser's JS, slots for title/plots/data

STEP_COLUMNS = (
    ("step", "step"),
    ("rollout/reward_mean", "reward"),
    ("rollout/correct_rate", "correct"),
    ("rollout/fast1", "Fast@1"),
    ("rollout/format_rate", "format"),
    ("rollout/hack_rate", "hacks"),
    ("rollout/trajectories", "trajectories"),
    ("outcomes/trained", "trained"),
    ("outcomes/filtered", "filtered"),
    ("outcomes/rejected_mrs", "MRS rej."),
    ("outcomes/rejected_prs", "PRS rej."),
    ("outcomes/masked_infra", "infra"),
    ("outcomes/dropped_stale", "stale"),
    ("train/pg_loss", "loss"),
    ("train/grad_norm", "grad norm"),
    ("staleness/max", "max lag"),
    ("trainer/version", "version"),
    ("time/step_s", "step s"),
    ("val/fast@1", "val fast@1"),
)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    """The readable lines of a JSONL file (a line cut by a killed writer is skipped, not fatal)."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            rows.append(value)
    return rows


def _json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element: no `</script>`, no `<!--`, no HTML entity can end or open anything."""
    text = json.dumps(value, default=str, allow_nan=False)
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


def _finite(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Metrics rows without NaN or infinities (strict JSON)."""
    return [
        {k: v for k, v in r.items() if not (isinstance(v, float) and v != v or v in (float("inf"), float("-inf")))}
        for r in rows
    ]


def _plots(run: Path, rows: list[dict[str, Any]], config: dict[str, Any]) -> list[tuple[str, str]]:
    """(title, data URI) of the run's plots: drawn from its metrics when the config is known, else its PNGs."""
    pngs: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        if rows and config:
            from drkernel.config.train import TrainConfig
            from drkernel.rl.rewards import reward_range
            from drkernel.train.plots import write_plots
            from drkernel.train.report import speed_source

            try:
                cfg = TrainConfig.model_validate(config)
                pngs = write_plots(rows, Path(tmp), run.name, reward_range(cfg.algorithm.reward), speed_source(cfg))
            except Exception:  # an old or foreign config: fall back to the PNGs the run wrote
                pngs = []
        if not pngs:
            pngs = sorted((run / "plots").glob("*.png")) + sorted(run.glob("*.png"))
        return [
            (p.stem.replace("_", " "), "data:image/png;base64," + base64.b64encode(p.read_bytes()).decode())
            for p in pngs
        ]


def _task_names(run: Path, config: dict[str, Any]) -> dict[str, str]:
    """task uuid -> the task's name, from the run's prompt pool (best effort: ids stay ids without it)."""
    import pyarrow.parquet as pq

    given = (config.get("rl_data") or {}).get("prompt_file")
    names: dict[str, str] = {}
    for path in [Path(given)] if given else sorted(run.glob("prompts-*.parquet")):
        try:
            rows = pq.read_table(path, columns=["extra_info"]).column("extra_info").to_pylist()
        except Exception:  # a folder of files, another schema, gone: the report shows ids
            continue
        for info in rows:
            info = json.loads(info) if isinstance(info, str) else info or {}
            uid = info.get("uuid") or info.get("problem_id")
            name = info.get("name") or info.get("module_name")
            if uid and name:
                names[str(uid)] = str(name)
    return names


def _train_data(run: Path) -> dict[str, Any]:
    config = _json(run / "config.json")
    metrics = _finite(_jsonl(run / "metrics.jsonl"))
    names = _task_names(run, config)
    outcomes = [
        r | {"task": names.get(str(r.get("task_uid")), r.get("task_uid"))} for r in _jsonl(run / "outcomes.jsonl")
    ]
    samples = [
        r | {"task": names.get(str(r.get("task_uid")), r.get("task_uid"))} for r in _jsonl(run / "samples.jsonl")
    ]
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16] if config else None
    return {
        "kind": "train",
        "config": config,
        "config_digest": digest,
        "summary": _json(run / "summary.json"),
        "metrics": metrics,
        "outcomes": outcomes[-MAX_OUTCOMES:],
        "outcomes_total": len(outcomes),
        "samples": samples,
    }


def _eval_data(folder: Path) -> dict[str, Any]:
    """A `drkernel eval` folder in the browser's terms: each sample's turns with their verdicts and the best kernel."""
    report = _json(folder / "report.json")
    samples = []
    for line in _jsonl(folder / "records.jsonl"):
        for record in line.get("samples", []):
            turns = []
            for i, t in enumerate(record.get("turns", [])):
                status = t.get("status")
                category = (
                    "infra" if status == "infra_error" else "format_failure" if status == "format"
                    else f"hack:{t['hack']}" if t.get("hack") else "correct" if t.get("correct")
                    else "wrong" if t.get("compiled") else "compile_error"
                )  # fmt: skip
                turns.append({"turn": i, "category": category, "reward": t.get("reward"), "verdict": t})
            if turns and record.get("kernel"):
                turns[-1]["kernel"] = record["kernel"]
            samples.append(
                {
                    "step": 0,
                    "group_id": record.get("task"),
                    "sample_index": record.get("sample"),
                    "task_uid": record.get("task"),
                    "task": record.get("task"),
                    "outcome": "errored" if record.get("error") else "judged",
                    "detail": record.get("error") or "",
                    "end_reason": None,
                    "prompt": None,
                    "response_tail": record.get("last_text"),
                    "turns": turns,
                }
            )
    settings = report.get("settings", {})
    outcomes = [s | {"turns": [{k: t[k] for k in ("turn", "category", "reward")} for t in s["turns"]]} for s in samples]
    return {
        "kind": "eval",
        "config": settings,
        "config_digest": hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16],
        "summary": report.get("summary", {}),
        "metrics": [],
        "outcomes": outcomes,
        "outcomes_total": len(outcomes),
        "samples": samples,
    }


def build_report(folder: Path, status: str | None = None) -> str:
    """The report of a training run folder (metrics.jsonl) or an eval folder (records.jsonl) as one HTML page."""
    folder = Path(folder)
    is_eval = (folder / "records.jsonl").is_file() and not (folder / "metrics.jsonl").is_file()
    data = _eval_data(folder) if is_eval else _train_data(folder)
    data["status"] = status or ("finished" if data["summary"] else "no summary yet (running, or ended early)")
    data["run"] = str(folder)
    data["written"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    data["columns"] = [[k, label] for k, label in STEP_COLUMNS]
    plots = [] if is_eval else _plots(folder, data["metrics"], data["config"])
    if is_eval and (folder / "fast_by_turn.png").is_file():
        plots = [
            (
                "fast by turn",
                "data:image/png;base64," + base64.b64encode((folder / "fast_by_turn.png").read_bytes()).decode(),
            )
        ]
    figures = "\n".join(
        f'<figure><img alt="{html.escape(title)}" src="{uri}"><figcaption>{html.escape(title)}</figcaption></figure>'
        for title, uri in plots
    )
    title = html.escape(f"drkernel report: {folder.name}")
    return (
        PAGE.read_text()
        .replace("__TITLE__", title)
        .replace("__FIGURES__", figures)
        .replace("__DATA__", _script_json(data))
    )


def write_report(folder: Path, status: str | None = None) -> Path:
    """FOLDER/report.html, written whole then renamed into place (a reader never sees half a page)."""
    folder = Path(folder)
    path = folder / "report.html"
    tmp = folder / ".report.html.tmp"
    tmp.write_text(build_report(folder, status), encoding="utf-8")
    tmp.replace(path)
    return path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", help="a run folder (drkernel train / demo) or a drkernel eval --out folder")
    parser.add_argument("--out", default=None, help="where to write the page (default FOLDER/report.html)")


def run(args: argparse.Namespace) -> int:
    folder = Path(args.folder)
    if not ((folder / "metrics.jsonl").is_file() or (folder / "records.jsonl").is_file()):
        raise UsageError(f"drkernel report: {folder} holds neither metrics.jsonl (a run) nor records.jsonl (an eval)")
    if args.out is None:
        path = write_report(folder)
    else:
        path = Path(args.out)
        path.write_text(build_report(folder), encoding="utf-8")
    print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    from pipelines.cli import main as cli_main

    return cli_main(["report", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
