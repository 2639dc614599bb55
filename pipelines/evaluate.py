"""`drkernel eval`: measure a policy the way KernelBench and the DR.Kernel paper do.

    drkernel eval --config configs/demo_cpu.yaml --tasks add,relu --policy CHECKPOINT --out eval-run
    drkernel eval --config configs/demo_cpu.yaml --data pool.parquet --policy http://HOST:PORT/PREFIX \\
        --tokenizer CHECKPOINT --out eval-run [--k 4 --turns 2 --rounds 2 --reference compile --device cuda]

The policy is a local Hugging Face checkpoint, served for the run by the policy Serve app (the training job's
app, under a name of this run), the base URL of any OpenAI-compatible chat endpoint (our policy app's route
is one), or fixed answers that check the verifier and the metrics on known kernels: `reference` (each task's
own reference renamed to ModelNew; add verifier.options.require_triton=false) or `solution:LABEL` (the task
folder's solution_LABEL.py). Verdicts come from the verifier Serve app with the config's `verifier.*` settings.
Each task's k samples run the rollout's own episode loop (drkernel.eval.episodes). `--out` holds records.jsonl
(one line per finished task: rerun the same command to resume, no task is counted twice), report.json,
report.md and fast_by_turn.png; the summary JSON is the last stdout line. `--limit N` stops after N new tasks (chunks).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any

from drkernel.config.train import TrainConfig
from drkernel.log import Progress, get_logger
from pipelines.cli import UsageError
from pipelines.train import load_train_config

log = get_logger("eval")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=None, help="YAML recipe (policy, rollout, verifier, algorithm, eval)")
    parser.add_argument(
        "--policy",
        required=True,
        help="HF checkpoint folder, http(s) base URL of an OpenAI-compatible endpoint, `reference` or `solution:LABEL`",
    )
    parser.add_argument("--data", default=None, help="parquet pool of task rows (default: data.tasks_dir's tasks)")
    parser.add_argument("--tasks", default=None, help="task names to keep, `a,b` or `@FILE` (default: all)")
    parser.add_argument("--out", required=True, help="folder of records and reports; an existing one is resumed")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda", "npu"], default=None, help="policy and verifier")
    parser.add_argument("--k", type=int, default=None, help="samples per task (eval.samples_per_task)")
    parser.add_argument("--turns", type=int, default=None, help="turns per round (eval.max_turns)")
    parser.add_argument("--rounds", type=int, default=None, help="sequential scaling rounds (eval.rounds)")
    parser.add_argument("--reference", choices=["eager", "compile"], default=None, help="eval.reference")
    parser.add_argument("--limit", type=int, default=None, help="stop after this many new tasks (a chunk)")
    parser.add_argument("--tokenizer", default=None, help="context ledger for a URL policy (default: the SFT one)")
    parser.add_argument("--model-name", default=None, help="`model` field sent to a URL policy")
    parser.add_argument("--api-token-env", default="DRKERNEL_API_TOKEN", help="env var of a URL policy's token")
    parser.add_argument("--address", default=None, help="Ray cluster to join (default: a private local one)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. eval.rounds=2")


def eval_overrides(args: argparse.Namespace) -> list[str]:
    flags = {
        "eval.samples_per_task": args.k,
        "eval.max_turns": args.turns,
        "eval.rounds": args.rounds,
        "eval.reference": args.reference,
    }
    out = [f"{k}={v}" for k, v in flags.items() if v is not None]
    if args.device:
        out += [f"policy.device={args.device}", f"verifier.device={args.device}"]
    return [*out, *args.overrides]


def settings_of(cfg: TrainConfig, policy: str, data: str | None, names: list[str]) -> dict[str, Any]:
    """What shapes the numbers; a resumed run must match them (drkernel.eval.store)."""
    from drkernel.eval.runner import episode_config

    episode = episode_config(cfg.rollout, cfg.eval)
    return {
        "policy": policy,
        "data": data,
        "tasks": names,
        "eval": cfg.eval.model_dump(mode="json", exclude={"tasks_at_once"}),
        "episode": episode.model_dump(
            mode="json",
            include={
                "max_turns",
                "max_new_tokens",
                "max_context_tokens",
                "feedback_max_tokens",
                "temperature",
                "top_p",
                "top_k",
            },
        ),
        "verify_options": cfg.verifier.options.model_dump(mode="json"),
        "reward": cfg.algorithm.reward.model_dump(mode="json"),
    }


class EvalServices:
    """The Ray side of an evaluation: Ray (joined or private), a verifier app and, for a checkpoint, a policy
    app, under names of this run; `close()` deletes only those and stops only a Ray it started."""

    def __init__(self, cfg: TrainConfig, address: str | None) -> None:
        import ray
        from ray import serve

        from serve_apps.runtime.ray_start import private_cpus, start_ray

        self.cfg = cfg
        self.apps: list[str] = []
        self.started_ray = False
        if not ray.is_initialized():
            self.started_ray = start_ray(address, num_cpus=private_cpus(4), log_to_driver=False)
            serve.start(http_options={"host": cfg.policy.http_host, "port": cfg.policy.http_port})
        self.tag = uuid.uuid4().hex[:8]

    def _deploy(self, name: str, app: Any, route_prefix: str | None) -> None:
        from ray import serve

        from drkernel.log import serve_logging_config

        serve.run(app, name=name, route_prefix=route_prefix, logging_config=serve_logging_config(False))
        self.apps.append(name)

    def verifier(self) -> Any:
        """A verify(reference, candidate, entry_point) callable on a fresh verifier app, as the rollout worker's."""
        import ray
        from ray import serve

        from drkernel.placement import resolve_kind
        from serve_apps.verifier import DEPLOYMENT_NAME, verify_task
        from serve_apps.verifier_app import build_app

        vc = self.cfg.verifier
        device = resolve_kind(vc.device, ray.cluster_resources(), "verifier.device")
        name = f"drkernel-eval-verifier-{self.tag}"
        self._deploy(name, build_app(vc.serve_config(device)), None)
        handle = serve.get_deployment_handle(DEPLOYMENT_NAME, app_name=name)

        async def verify(reference: str, candidate: str, entry_point: str) -> Any:
            return await verify_task(handle, reference, candidate, entry_point, vc.options)

        return verify

    def policy(self, model_path: str) -> Any:
        """A generate(ids, sampling) callable on a policy app serving `model_path` (as the rollout worker's)."""
        import ray

        from drkernel.config.train import PolicyConfig
        from drkernel.placement import resolve_kind
        from serve_apps.policy import build_policy_app, policy_handle

        pc = self.cfg.policy
        name = f"drkernel-eval-policy-{self.tag}"
        device = resolve_kind(pc.device, ray.cluster_resources(), "policy.device")
        pc = PolicyConfig.model_validate(
            pc.model_dump() | {"app_name": name, "route_prefix": f"/{name}", "device": device}
        )
        self._deploy(name, build_policy_app(pc, model_path, f"eval-{self.tag}"), pc.route_prefix)
        handle = policy_handle(name)

        async def generate(prompt_ids: list[int], sampling: Any) -> Any:
            return await handle.generate.remote(prompt_ids, sampling)

        return generate

    def close(self) -> None:
        import ray
        from ray import serve

        for name in self.apps:
            try:
                serve.delete(name)
            except Exception as e:  # keep deleting the others
                log.warning("deleting Serve app %s: %s", name, e)
        if self.started_ray:
            serve.shutdown()
            ray.shutdown()


def _tokenizer_path(cfg: TrainConfig, args: argparse.Namespace, kind: str) -> str:
    """The checkpoint's own tokenizer; for other policies --tokenizer, else policy.model_path, else the SFT one."""
    if kind == "checkpoint":
        return args.policy
    if args.tokenizer:
        return args.tokenizer
    from drkernel.sft.warm_start import is_complete, with_sft_paths

    sft = with_sft_paths(cfg).sft.output_dir
    if cfg.policy.model_path:
        return cfg.policy.model_path
    if sft and is_complete(sft):
        return sft
    raise UsageError(
        f"drkernel eval: a {kind} policy needs --tokenizer (a ChatML tokenizer folder) as its context ledger"
    )


def run(args: argparse.Namespace) -> int:
    cfg = load_train_config(args.config, eval_overrides(args), "drkernel eval")
    kind = policy_kind(args.policy)
    if cfg.eval.reference == "compile" and cfg.verifier.options.timing == "cpu_model":
        raise UsageError(
            "drkernel eval: --reference compile cannot be priced by the CPU cost model (timing: cpu_model counts eager "
            "operators); use measured timing (verifier.options.timing=measured), on a GPU"
        )
    if args.limit is not None and args.limit < 1:
        raise UsageError("drkernel eval: --limit must be at least 1")
    from drkernel.eval.store import RecordStore, SettingsMismatch
    from drkernel.eval.tasks import load_tasks

    policy = str(Path(args.policy).resolve()) if kind == "checkpoint" else args.policy
    names = task_names(args.tasks)
    try:
        tasks = load_tasks(args.data, names, cfg.data.tasks_dir, cfg.rl_data.prompt_style)
        store = RecordStore(args.out, settings_of(cfg, policy, args.data, [n for n, _ in tasks]))
    except (ValueError, FileNotFoundError, SettingsMismatch) as e:
        raise UsageError(f"drkernel eval: {e}") from None
    if store.dropped_partial:
        log.warning("records.jsonl ended in a cut line (a stopped run); that task runs again")
    summary = evaluate(cfg, args, tasks, store, policy, kind)
    print(json.dumps(summary))
    return 0


def task_names(spec: str | None) -> list[str] | None:
    """`a,b,c`, or `@FILE` with one name a line (`#` starts a comment): a named subset kept in a file."""
    if not spec:
        return None
    if spec.startswith("@"):
        path = Path(spec[1:])
        if not path.is_file():
            raise UsageError(f"drkernel eval: --tasks {spec}: no such file")
        lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
        return [line for line in lines if line]
    return [n.strip() for n in spec.split(",") if n.strip()]


def policy_kind(policy: str) -> str:
    """checkpoint | url | reference | solution, or a usage error naming what was given."""
    if policy.startswith(("http://", "https://")):
        return "url"
    if policy == "reference":
        return "reference"
    if policy.startswith("solution:") and policy.split(":", 1)[1]:
        return "solution"
    if (Path(policy) / "config.json").is_file():
        return "checkpoint"
    raise UsageError(
        f"drkernel eval: --policy {policy} is not an HF model folder, an http(s) URL, `reference` or `solution:LABEL`"
    )


def policy_for(
    kind: str, policy: str, services: Any, tokenizer: Any, cfg: TrainConfig, args: argparse.Namespace
) -> Any:
    """generate_for(name, row): the same model for every task, or each task's fixed answer."""
    from drkernel.eval.answers import FixedAnswer, reference_answer, solution_answer
    from drkernel.eval.chat import ChatEndpoint
    from drkernel.tasks import library_path

    if kind == "url":
        endpoint = ChatEndpoint(policy, tokenizer, args.model_name, os.environ.get(args.api_token_env))
        return lambda _name, _row: endpoint
    if kind == "checkpoint":
        generate = services.policy(policy)
        return lambda _name, _row: generate
    if kind == "reference":
        return lambda _name, row: FixedAnswer(tokenizer, reference_answer(row.reference_code, row.entry_point))
    label, folder = policy.split(":", 1)[1], cfg.data.tasks_dir or library_path()
    return lambda name, _row: FixedAnswer(tokenizer, solution_answer(folder, name, label))


def evaluate(cfg: TrainConfig, args: argparse.Namespace, tasks: list, store: Any, policy: str, kind: str) -> dict:
    """Run the missing tasks through the services, then write the reports over every stored task."""
    from transformers import AutoTokenizer

    from drkernel.eval.metrics import summarize
    from drkernel.eval.references import reference_source
    from drkernel.eval.report import write_report
    from drkernel.eval.runner import episode_config, evaluate_tasks

    tokenizer = AutoTokenizer.from_pretrained(_tokenizer_path(cfg, args, kind))
    services = EvalServices(cfg, args.address)
    try:
        base_verify = services.verifier()
        mode = cfg.eval.reference

        async def verify(reference: str, candidate: str, entry_point: str) -> Any:
            return await base_verify(reference_source(reference, entry_point, mode), candidate, entry_point)

        generate_for = policy_for(kind, policy, services, tokenizer, cfg, args)
        remaining = sum(1 for n, _ in tasks if n not in store.done)
        log.info(
            "%d tasks, %d already done in %s, %d to run now",
            len(tasks),
            len(tasks) - remaining,
            args.out,
            min(remaining, args.limit or remaining),
        )
        with Progress(len(tasks), "eval tasks", every_s=30.0, initial=len(tasks) - remaining) as bar:
            asyncio.run(
                evaluate_tasks(
                    tasks,
                    store,
                    generate_for,
                    verify,
                    tokenizer,
                    episode_config(cfg.rollout, cfg.eval),
                    cfg.algorithm.reward,
                    cfg.eval,
                    args.limit,
                    on_task=lambda _: bar.update(),
                )
            )
    finally:
        services.close()
    wanted = {n for n, _ in tasks}
    records = [r for r in store.records() if r.task in wanted]
    if not records:
        raise UsageError("drkernel eval: no task finished, nothing to report")
    summary = summarize(records, cfg.eval.fast_p, cfg.eval.pass_k)
    summary["complete"] = len({r.task for r in records}) == len(wanted)
    summary["reference"] = cfg.eval.reference
    title = f"{Path(policy).name or policy} ({cfg.eval.reference} reference)"
    paths = write_report(Path(args.out), summary, store_settings(store), title)
    from pipelines.report import write_report as write_html

    paths["html"] = write_html(Path(args.out), "finished" if summary["complete"] else "partial: tasks remain")
    summary["files"] = {k: str(v) for k, v in paths.items()}
    return summary


def store_settings(store: Any) -> dict[str, Any]:
    return json.loads((store.folder / "run.json").read_text())
