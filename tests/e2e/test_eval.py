"""`drkernel eval` of the tiny policy on shipped tasks, on the session's real Ray cluster: through the policy
app's handle (a checkpoint), resumed after a chunk, and through the policy app's OpenAI route over HTTP."""

from __future__ import annotations

import json

import pytest

from pipelines.cli import main

pytestmark = pytest.mark.integration


def _eval(overrides: list[str], *args: str, capsys) -> dict:
    assert main(["eval", *args, *overrides]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_eval_of_a_checkpoint_resumes_a_chunk_and_counts_every_sample(ray_cluster, tiny_recipe, tmp_path, capsys):
    root, overrides = tiny_recipe
    overrides = [*overrides, "eval.temperature=0"]  # greedy: the warm start's answers, which hold real kernels
    out = tmp_path / "eval"
    args = ("--policy", str(root / "sft"), "--tasks", "add,relu", "--k", "2", "--turns", "2", "--out", str(out))
    first = _eval(overrides, *args, "--limit", "1", capsys=capsys)
    assert first["tasks"] == 1 and first["samples"] == 2 and first["complete"] is False
    chunk = (out / "records.jsonl").read_text()
    summary = _eval(overrides, *args, capsys=capsys)
    lines = (out / "records.jsonl").read_text().splitlines()
    assert (out / "records.jsonl").read_text().startswith(chunk) and len(lines) == 2  # the first task was not rerun
    assert summary["tasks"] == 2 and summary["samples"] == 4 and summary["complete"] is True
    samples = [s for line in lines for s in json.loads(line)["samples"]]
    turns = [t for s in samples for t in s["turns"]]
    # real kernels, judged by the real verifier (the tiny warm start's greedy kernels carry typos: a free name in a
    # kernel body is refused by the gate, a broken line fails to compile; either is a verdict, not a format failure)
    assert any(t["status"] == "ok" for t in turns), [s["last_text"] for s in samples]
    honest = sum(any(t["status"] == "ok" and t["correct"] and t["hack"] is None for t in s["turns"]) for s in samples)
    assert summary["best"]["fast@0"] == pytest.approx(honest / 4)
    assert len(summary["per_turn"]) == summary["max_turns"] == 2
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["best"] == summary["best"] and report["settings"]["tasks"] == ["add", "relu"]
    page = (out / "report.html").read_text()  # beside report.md: every sample in the trajectory browser's data
    data = json.loads(page.split('id="report-data">', 1)[1].split("</script>", 1)[0])
    assert (
        data["kind"] == "eval" and data["status"] == "finished" and summary["files"]["html"] == str(out / "report.html")
    )
    assert sorted((s["task_uid"], s["sample_index"]) for s in data["samples"]) == sorted(
        (s["task"], s["sample"]) for s in samples
    )
    assert [len(s["turns"]) for s in data["samples"]] == [len(s["turns"]) for s in samples]
    assert "| turn |" in (out / "report.md").read_text()
    assert (out / "fast_by_turn.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["eval", *args, "--k", "3", *overrides]) == 2  # other settings in the same folder: refused
    assert "other settings" in capsys.readouterr().err


def test_eval_through_the_policy_apps_openai_route(ray_cluster, tiny_recipe, tmp_path, capsys):
    from ray import serve

    from drkernel.config.base import load_config
    from drkernel.config.train import TrainConfig
    from serve_apps.policy import build_policy_app

    root, overrides = tiny_recipe
    overrides = [*overrides, "eval.temperature=0"]
    cfg = load_config(TrainConfig, None, [*overrides, "policy.app_name=eval-route", "policy.route_prefix=/eval-route"])
    serve.run(build_policy_app(cfg.policy, str(root / "sft")), name="eval-route", route_prefix="/eval-route")
    try:
        url = ray_cluster["http_url"] + "/eval-route"
        out = tmp_path / "eval-http"
        summary = _eval(
            overrides,
            *("--policy", url, "--tokenizer", str(root / "sft"), "--tasks", "add", "--k", "2", "--turns", "2"),
            *("--out", str(out)),
            capsys=capsys,
        )
    finally:
        serve.delete("eval-route")
    assert summary["samples"] == 2 and summary["samples_errored"] == 0
    turns = [
        t
        for line in (out / "records.jsonl").read_text().splitlines()
        for s in json.loads(line)["samples"]
        for t in s["turns"]
    ]
    assert len(turns) == 4  # two turns each: the second was asked with the first's feedback through the route
    assert any(t["status"] == "ok" for t in turns), (out / "records.jsonl").read_text()[-3000:]


def test_fixed_answers_score_as_known_kernels(ray_cluster, tiny_recipe, tmp_path, capsys):
    """The shipped solutions are correct, so every sample counts at fast@0; a reference answering for itself
    (no Triton, allowed here) is correct too."""
    root, overrides = tiny_recipe
    common = ("--tokenizer", str(root / "sft"), "--tasks", "add,relu", "--k", "1", "--turns", "1")
    solved = _eval(overrides, "--policy", "solution:fused", *common, "--out", str(tmp_path / "s"), capsys=capsys)
    assert solved["best"]["fast@0"] == 1.0 and solved["correct_rate"] == 1.0 and solved["samples"] == 2
    itself = _eval(
        [*overrides, "verifier.options.require_triton=false"],
        *("--policy", "reference", *common, "--out", str(tmp_path / "r")),
        capsys=capsys,
    )
    assert itself["best"]["fast@0"] == 1.0
