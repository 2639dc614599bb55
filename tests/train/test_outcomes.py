"""outcomes.jsonl and samples.jsonl as MetricsWriter writes them from a step's summaries and the trainer's decisions."""

from __future__ import annotations

import json

from drkernel.train.metrics import MetricsWriter


def _row(gid: str, i: int) -> dict:
    return {"group_id": gid, "sample_index": i, "task_uid": "add", "turns": [{"turn": 0, "category": "wrong"}]}


def _decision(gid: str, i: int, outcome: str, detail: str = "") -> dict:
    turns = [{"turn": 0, "decision": "trained", "advantage": -0.5}] if outcome == "trained" else []
    return {"group_id": gid, "sample_index": i, "outcome": outcome, "detail": detail, "turns": turns}


def test_each_trajectory_once_a_step_with_its_outcome_and_a_buffered_one_again_when_trained(tmp_path):
    writer = MetricsWriter(tmp_path, tensorboard=False)
    first = writer.write_outcomes(
        1,
        [_row("a", 0), _row("b", 0)],
        [_decision("a", 0, "buffered", "held"), _decision("b", 0, "filtered", "reward std 0")],
        [{"group_id": "c", "task_uid": "relu", "samples": [0, 1], "detail": "stale: 2 behind"}],
        [{"group_id": "d", "error": "the part that died: X"}],
        [_row("a", 0) | {"prompt": "p"}],
    )
    assert first == {
        "outcomes/buffered": 1.0,
        "outcomes/filtered": 1.0,
        "outcomes/dropped_stale": 2.0,
        "outcomes/failed": 1.0,
    }
    second = writer.write_outcomes(
        2, [_row("e", 0)], [_decision("e", 0, "trained"), _decision("a", 0, "trained")], [], [], []
    )
    assert second == {"outcomes/trained": 2.0}
    writer.close()
    lines = [json.loads(x) for x in (tmp_path / "outcomes.jsonl").read_text().splitlines()]
    assert [(x["step"], x["group_id"], x["outcome"]) for x in lines] == [
        (1, "a", "buffered"),
        (1, "b", "filtered"),
        (1, "c", "dropped_stale"),
        (1, "c", "dropped_stale"),
        (1, "d", "failed"),
        (2, "e", "trained"),
        (2, "a", "trained"),
    ]
    held = lines[-1]  # trained a step after it was sampled: its verdicts come from the step that buffered it
    assert held["task_uid"] == "add" and held["turns"] == [
        {"turn": 0, "category": "wrong", "decision": "trained", "advantage": -0.5}
    ]
    (sample,) = [json.loads(x) for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert sample["outcome"] == "buffered" and sample["prompt"] == "p" and sample["turns"][0]["decision"] is None
