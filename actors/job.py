"""The training job: setup, run, checkpoint, cleanup (a torchtune-style recipe over Ray actors), read top to
bottom in that order.

    setup()      join or start Ray; check that the run folder is shared by every node; resolve "auto" devices
                 from the cluster's resources; run the SFT warm start as a Ray task with a trainer rank's
                 resources when there is no checkpoint (actors/job_inputs.py); deploy this job's verifier (the app
                 of `drkernel serve verifier`, autoscaled) and policy Serve apps (its own names, never a
                 stranger's); start the trainer ranks, the prompt source, the trajectory queue and the rollout
                 pool; on --resume restore every one of them from the latest checkpoint.
    run()        each step: trainer rank 0 takes B finished groups from the queue itself (admission keeps them
                 within max_staleness versions), every rank trains on them, every k steps rank 0 pushes weights
                 to every policy replica and the version advances; the driver gets metrics and a batch report
                 back, never trajectories; it logs, samples, checkpoints every m steps.
    checkpoint   every m steps the ranks save weights, optimizer and RNG with the queue's and prompt source's
                 state; a resume restores them and pushes the saved weights to the replicas again.
    cleanup()    stop the rollout workers, kill the actors, delete only the Serve apps this job deployed
                 (their replicas close their fork-servers and engines), leave a cluster it joined running.

The job is the driver: it holds no model, no trajectories, no policy version (trainer rank 0 owns it,
actors/trainer.py) and does no maths, so it can run on a head node without accelerators. Every file it makes
lives in one run folder (drkernel.train.run_folder). Rollout workers run concurrently with training the whole
time, which is what makes the run asynchronous; max_staleness 0 makes it synchronous for comparison.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray import serve

from actors.job_inputs import absolute_paths, prompt_file, resolve_model_path
from actors.job_stop import JobStalled, JobStopped, JobUnschedulable, raise_stopped, run_until_stopped
from actors.placement_report import nodes_used
from actors.prompt_source import PromptSource, PromptSourceOptions
from actors.rollout_pool import RolloutPool, worker_factory
from actors.scheduling_watch import STOP_SIGNAL, SchedulingWatch
from actors.shared_folder import check_shared
from actors.stall_watch import StallWatch
from actors.trainer import create_trainer_group
from actors.trajectory_queue import TrajectoryQueue
from actors.validation import make_validator
from drkernel.config.train import TrainConfig
from drkernel.log import Progress, get_logger, kv, serve_logging_config, setup_logging
from drkernel.placement import resolve_kind
from drkernel.sft.warm_start import with_sft_paths
from drkernel.train.checkpoint import latest_checkpoint
from drkernel.train.decisions import merge_rank_decisions
from drkernel.train.metrics import MetricsWriter
from drkernel.train.report import config_digest, speed_source, throughput
from drkernel.train.run_folder import RunFolderError, resolve_run_folder
from drkernel.train.scheduling import fit_read_cpus, reserved_cpus, resource_requests
from serve_apps.runtime.ray_start import private_cpus, start_ray

log = get_logger("train")


@dataclass
class _Clock:
    """The RL loop's start, its last step's end, its first step and the tokens it sampled (for throughputs)."""

    start: float
    last: float
    first_step: int
    tokens: int = 0


class TrainJob:
    """One training run; `main()` = setup, run, cleanup, returning the run's summary."""

    def __init__(
        self,
        cfg: TrainConfig,
        resume: bool = False,
        address: str | None = None,
        allow_sft: bool = True,
        on_report: Callable[[Path, str], None] | None = None,
    ) -> None:
        """`on_report(run_folder, status)` writes the run's report (pipelines/report.py): on a resume, when the run
        fails, stalls or is stopped (before cleanup: `ray job stop` leaves the driver little time) and at its end."""
        if resume and cfg.trainer.output_dir is None:
            raise RunFolderError("--resume needs the run folder to continue (--resume RUN_FOLDER)")
        cfg = with_sft_paths(absolute_paths(cfg, resolve_run_folder(cfg.trainer.output_dir, Path.cwd(), Path.home())))
        self.allow_sft = allow_sft
        self.sft_wall_s = 0.0
        self.cfg = cfg
        self.resume = resume
        self.address = address or os.environ.get("RAY_ADDRESS")
        self.out = Path(str(cfg.trainer.output_dir))
        self._started_ray = False
        self._apps: list[str] = []
        self._actors: list[Any] = []
        self.ranks: list[Any] = []
        self.pool: RolloutPool | None = None
        self.step = 0
        self.history: list[dict[str, float]] = []
        self.nodes_used = 0
        self.trained_group_ids: list[str] = []
        self.validator = None
        self.validations: list[dict[str, float]] = []  # the step-0 validation (later ones ride in their step's row)
        self.on_report = on_report
        self.watch: SchedulingWatch | None = None
        self.read_cpus = cfg.rl_data.read_cpus  # fitted to the cluster in setup
        self._failed_seen = 0

    # ---- setup ----------------------------------------------------------------------------------------------------
    def setup(self) -> None:
        """Ray, the run folder and devices; the policy weights; the Serve apps; the actors; a resume's state; the
        rollout pool. Each part in its own method below, in this order."""
        checkpoint = self._prepare()
        self._phase("checking the run folder on every node")
        log.info("run folder shared by all %d node(s) of the cluster", check_shared(self.out))
        self._phase("policy weights (SFT warm start when this config has none)")
        model_path, self.sft_wall_s = resolve_model_path(self.cfg, self.allow_sft, on_cluster=True)
        self.prompts = prompt_file(self.cfg)
        self._phase("deploying the verifier and policy Serve apps")
        policy, verifier, tokenizer = self._deploy_apps(model_path)
        self._phase("starting the trainer ranks, prompt source, trajectory queue and rollout workers")
        self._start_actors(model_path)
        if checkpoint is not None:
            self._phase(f"restoring {checkpoint.name}")
            self._restore(checkpoint)
        self._start_rollouts(policy, verifier, tokenizer)

    def _prepare(self) -> Path | None:
        """Refusals first (--no-sft, --resume without a checkpoint), then the run folder, Ray, the devices, the read
        share and the scheduling watch; returns the checkpoint to resume from."""
        if not self.allow_sft:  # refuse before anything is made or started
            resolve_model_path(self.cfg, allow_sft=False)
        setup_logging(self.cfg.logging.json_logs or None)  # None: the environment (`--log-json`) decides
        log.info("run folder %s", self.out)
        self.out.mkdir(parents=True, exist_ok=True)
        checkpoint = latest_checkpoint(self.out / "checkpoints") if self.resume else None
        if self.resume and checkpoint is None:
            raise FileNotFoundError(f"--resume: no checkpoint under {self.out / 'checkpoints'}")
        self._started_ray = start_ray(self.address, num_cpus=private_cpus(reserved_cpus(self.cfg)))
        self._resolve_devices()
        self._fit_reads()
        (self.out / "config.json").write_text(json.dumps(self.cfg.model_dump(mode="json"), indent=2))  # for the report
        tc = self.cfg.trainer
        self.watch = SchedulingWatch(self.requests(), tc.schedule_warn_s, tc.schedule_limit_s).start()
        return checkpoint

    def requests(self) -> dict[str, dict[str, float]]:
        """What each part of the job asks the cluster for, in Ray's resource names (for the wait reports)."""
        return resource_requests(self.cfg, self.read_cpus)

    def _fit_reads(self) -> None:
        """rl_data.read_cpus, or what the cluster has left after this job's actors and replicas (down to the floor);
        refuses, naming both numbers, when not even the floor fits."""
        rl = self.cfg.rl_data
        cluster = float(ray.cluster_resources().get("CPU", 0.0))
        actors = reserved_cpus(self.cfg) - rl.read_cpus
        self.read_cpus = fit_read_cpus(cluster, actors, rl.read_cpus, rl.read_cpus_floor)
        if self.read_cpus < rl.read_cpus:
            log.warning(
                "prompt reads get %g CPU per task instead of rl_data.read_cpus=%g: the cluster's %g CPUs less the %g "
                "this job's actors and replicas reserve",
                self.read_cpus,
                rl.read_cpus,
                cluster,
                actors,
            )

    def _phase(self, name: str) -> None:
        """Say what the job does now (stderr), and name it in any report of work waiting for resources."""
        log.info("phase: %s", name)
        if self.watch is not None:
            self.watch.phase = name

    def _deploy(self, name: str, app: Any, route_prefix: str | None) -> None:
        if name in serve.status().applications:
            if not self.resume:
                raise RuntimeError(
                    f"a Serve app named {name!r} already runs on this cluster; this job deploys its "
                    f"own apps and never replaces another's (set policy.app_name / verifier.app_name, "
                    f"or --resume to take over the apps a killed run of this job left behind)"
                )
            log.warning("replacing Serve app %s left behind by the run being resumed", name)
        self._apps.append(name)  # before it runs: a deployment stopped while it waits is deleted too
        serve.run(
            app, name=name, route_prefix=route_prefix, logging_config=serve_logging_config(self.cfg.logging.verbose)
        )

    def _deploy_verifier(self) -> Any:
        """The app `drkernel serve verifier` runs, autoscaled, under this job's name; an HTTP route only when
        verifier.route_prefix is set (users verify kernels on the training cluster; token auth as there)."""
        from serve_apps.verifier import DEPLOYMENT_NAME
        from serve_apps.verifier_app import build_app

        vc = self.cfg.verifier
        self._deploy(vc.app_name, build_app(vc.serve_config(vc.device)), vc.route_prefix)
        return serve.get_deployment_handle(DEPLOYMENT_NAME, app_name=vc.app_name)

    def _resolve_devices(self) -> None:
        """Every "auto" device becomes what the cluster offers, once, from ray.cluster_resources()."""
        resources = ray.cluster_resources()
        data = self.cfg.model_dump()
        for section in ("trainer", "policy", "verifier"):
            data[section]["device"] = resolve_kind(data[section]["device"], resources, f"{section}.device")
        self.cfg = TrainConfig.model_validate(data)

    def _deploy_apps(self, model_path: str) -> tuple[Any, Any, Any]:
        """Serve with this job's HTTP options, then the verifier and policy apps; returns the policy and verifier
        handles and the policy's tokenizer."""
        from transformers import AutoTokenizer

        from serve_apps.policy import build_policy_app, policy_handle

        cfg = self.cfg
        serve.start(
            http_options={"host": cfg.policy.http_host, "port": cfg.policy.http_port},
            logging_config=serve_logging_config(cfg.logging.verbose),
        )
        log.info("ray %s; model %s; prompts %s", ray.get_runtime_context().gcs_address, model_path, self.prompts)
        verifier = self._deploy_verifier()
        self._deploy(
            cfg.policy.app_name, build_policy_app(cfg.policy, model_path, self.out.name), cfg.policy.route_prefix
        )
        return policy_handle(cfg.policy.app_name), verifier, AutoTokenizer.from_pretrained(model_path)

    def _start_actors(self, model_path: str) -> None:
        """The trainer ranks, the prompt source and the trajectory queue; rank 0 pushes weights to the policy app
        and tells the queue each version."""
        cfg = self.cfg
        self.ranks = create_trainer_group(cfg, model_path)
        max_prompt = cfg.rl_data.max_prompt_tokens or cfg.rollout.max_context_tokens - cfg.rollout.min_generation_tokens
        options = PromptSourceOptions(
            skip_invalid=cfg.rl_data.skip_invalid,
            max_prompt_tokens=max_prompt,
            tokenizer_path=model_path,
            window_rows=cfg.rl_data.window_rows,
            task_cpus=self.read_cpus,
        )
        self.source = PromptSource.remote(self.prompts, cfg.rl_data.seed, cfg.rl_data.num_epochs, options)
        self.queue = TrajectoryQueue.remote(cfg.queue, cfg.trainer.publish_every, self.source, self.out.name)
        self._actors += [self.source, self.queue]
        ray.get([r.attach_policy.remote(None, self.queue) for r in self.ranks])

    def _start_rollouts(self, policy: Any, verifier: Any, tokenizer: Any) -> None:
        """The rollout pool (started by `run`), the validator and the metrics writer."""
        cfg = self.cfg
        factory = worker_factory(
            self.queue,
            self.source,
            policy,
            verifier,
            tokenizer,
            cfg.rollout,
            cfg.algorithm.reward,
            verify_options=cfg.verifier.options,
            verify_delay_s=cfg.verifier.injected_latency_s,
            run=self.out.name,
        )
        self.pool = RolloutPool(factory, cfg.rollout.num_workers, self.queue, self.source)
        self.validator = make_validator(cfg, policy, verifier, tokenizer)
        self.writer = MetricsWriter(
            self.out,
            jsonl=cfg.logging.jsonl,
            tensorboard=cfg.logging.tensorboard,
            wandb=cfg.logging.wandb,
            wandb_project=cfg.logging.wandb_project,
            run_config=cfg.model_dump(mode="json"),
        )

    # ---- run -------------------------------------------------------------------------------------------------------
    def run(self) -> None:
        """`_run`, stopped at its next await by SIGTERM/SIGINT (JobStopped) or by work that cannot be scheduled."""
        asyncio.run(run_until_stopped(self._run, self._unschedulable))

    async def _run(self) -> None:
        cfg = self.cfg
        assert self.pool is not None
        self.pool.start()
        rollouts = asyncio.ensure_future(self.pool.wait())
        stall = StallWatch(self.queue, self.source, self.pool, self._apps, cfg.trainer)
        clock = _Clock(start=time.monotonic(), last=time.monotonic(), first_step=self.step)
        self._phase(f"RL steps {self.step + 1}-{cfg.trainer.total_steps}")
        bar = Progress(cfg.trainer.total_steps, "train steps", every_s=60.0, initial=self.step)  # + a line per step
        await stall.reset()
        if self.validator is not None and self.step == 0:
            self.validations.append({"step": 0.0, **await self.validator.run()})
            self.writer.write(0, self.validations[-1])
        while self.step < cfg.trainer.total_steps:
            batch = await self._pull(cfg.logging.report_samples_per_step)
            if batch is None:
                if rollouts.done():
                    rollouts.result()  # re-raise a pool failure; else the prompts ran out
                    log.info("prompts exhausted after %d steps", self.step)
                    break
                await stall.check()
                continue
            await stall.reset()
            if self.step + 1 == cfg.trainer.total_steps:
                # The last batch: no rollout may start for a step that never comes, so the saved cursor is
                # exactly what was trained (plus groups returned to the source, re-issued on a resume).
                await self.pool.stop()
            if not self.nodes_used:  # every role has started by the first batch
                self.nodes_used = nodes_used(self._apps)
            await self._step(batch, clock)
            bar.update()
            if self.step % cfg.trainer.checkpoint_every == 0 or self.step == cfg.trainer.total_steps:
                await self._checkpoint()
        bar.close()
        await self.pool.stop()
        rollouts.cancel()

    async def _pull(self, samples: int) -> dict[str, Any] | None:
        """Rank 0 takes the next batch from the queue; the driver gets its report and a reference, not the data."""
        return await self.ranks[0].pull_batch.remote(self.queue, self.cfg.queue.groups_per_step, 5.0, samples)

    async def _step(self, batch: dict[str, Any], clock: _Clock) -> None:
        """One step on a pulled batch: train (and push), outcomes, validation when due; its row and its log line."""
        metrics = await self._train_once(batch, clock)
        metrics.update(await self._record_outcomes(batch))
        if self.validator is not None and self.validator.due(self.step):
            metrics.update(await self.validator.run())
        clock.tokens += int(metrics["rollout/tokens"])
        now = time.monotonic()
        metrics["throughput/step_tokens_per_s"] = metrics["rollout/tokens"] / max(now - clock.last, 1e-9)
        metrics["verifier/evaluations_per_s"] = metrics["rollout/verifier_calls"] / max(now - clock.last, 1e-9)
        total = self.cfg.trainer.total_steps
        eta_s = (now - clock.start) / (self.step - clock.first_step) * (total - self.step)
        clock.last = now
        self.history.append(metrics)
        self.writer.write(self.step, metrics)
        shown = {
            "reward": metrics.get("rollout/reward_mean", 0.0),
            "correct": metrics.get("rollout/correct_rate", 0.0),
            "fast1": metrics.get("rollout/fast1", 0.0),
            "staleness": int(metrics["staleness/max"]),
            "tok/s": metrics["throughput/step_tokens_per_s"],
            "version": int(metrics["trainer/version"]),
        }
        log.info("step %d/%d | %s | ETA %ds", self.step, total, kv(shown), round(eta_s))

    async def _train_once(self, batch: dict[str, Any], clock: _Clock) -> dict[str, float]:
        """Every rank trains on the batch; every publish_every steps rank 0 pushes the weights (the version
        advances there); the step's metrics, with the lags against the version the batch was pulled at."""
        t0 = time.monotonic()
        metrics = (await asyncio.gather(*(r.train_pulled.remote(batch["refs"]) for r in self.ranks)))[0]
        self.step += 1
        self.trained_group_ids += batch["group_ids"]
        lags = [batch["version"] - v for v in batch["min_versions"]]
        metrics.update(
            {
                "step": float(self.step),
                "staleness/max": float(max(lags)),
                "staleness/mean": sum(lags) / len(lags),
                "time/train_s": time.monotonic() - t0,
                "trainer/version": float(batch["version"]),
            }
        )
        if self.step % self.cfg.trainer.publish_every == 0:
            metrics.update((await asyncio.gather(*(r.publish_weights.remote() for r in self.ranks)))[0])
        tokens, verified = batch["tokens"], batch["verifier_calls"]
        queue = await self.queue.stats.remote()
        source = await self.source.stats.remote()
        metrics.update(await self.source.metrics.remote())
        metrics.update(
            {
                "groups/dropped_stale": float(queue.get("dropped", 0)),  # cumulative, like the two below
                "groups/failed": float(source.get("failed", 0)),
                "groups/requeued_infra": float(source.get("requeued", 0)),
                "rollout/tokens": float(tokens),
                "rollout/verifier_calls": float(verified),
                "rollout/verifier_s_per_call": batch["verify_s"] / max(verified, 1),
                "verifier/queue_wait_s_per_call": batch["verify_wait_s"] / max(verified, 1),
                "time/generate_s": batch["generate_s"],  # summed over the batch's trajectories, as the two below
                "time/verify_s": batch["verify_s"],
                "throughput/tokens_per_s": (clock.tokens + tokens) / max(time.monotonic() - clock.start, 1e-9),
                "queue/ready": float(queue["ready"]),
                "queue/running": float(queue.get("running", 0)),
                "queue/dropped": float(queue.get("dropped", 0)),
                "time/step_s": time.monotonic() - t0,
            }
        )
        return metrics

    async def _record_outcomes(self, batch: dict[str, Any]) -> dict[str, float]:
        """Every trajectory of the step with what became of it (outcomes.jsonl), groups dropped as stale or failed
        since the last step, and the step's whole samples (samples.jsonl); returns the counts per outcome."""
        decisions = merge_rank_decisions(await asyncio.gather(*(r.last_decisions.remote() for r in self.ranks)))
        dropped = await self.queue.take_dropped.remote()
        failed = await self.source.failed.remote()
        failed, self._failed_seen = failed[self._failed_seen :], len(failed)
        return self.writer.write_outcomes(
            self.step, batch["trajectories"], decisions, dropped, failed, batch["samples"]
        )

    # ---- checkpoint ------------------------------------------------------------------------------------------------
    async def _checkpoint(self) -> None:
        """Every rank saves its shards with the trainer's state (the policy version among it); the job adds its
        step, the queue and prompt source taken at one instant, and its history."""
        extra = {
            "step": self.step,
            "queue": await self.queue.state_dict.remote(),
            "trained_group_ids": self.trained_group_ids,
            "nodes_used": self.nodes_used,
            "history": self.history,
        }
        path = (
            await asyncio.gather(*(r.save_checkpoint.remote(str(self.out / "checkpoints"), extra) for r in self.ranks))
        )[0]
        log.info("checkpoint %s", path)

    def _restore(self, path: Path) -> None:
        """Trainer (weights, optimizer, RNG, filter, policy version), queue + prompt source, step; then the ranks
        push the weights to the policy replicas again under the saved version, so rollouts continue where they
        stopped."""
        extra = ray.get([r.load_checkpoint.remote(str(path)) for r in self.ranks])[0]
        ray.get(self.queue.load_state_dict.remote(extra["queue"]))
        self.step = int(extra["step"])
        self.trained_group_ids = list(extra.get("trained_group_ids", []))
        self.history = list(extra.get("history", []))
        version = ray.get([r.republish.remote() for r in self.ranks])[0]
        log.info("resumed from %s at step %d, policy version %d", path, self.step, version)
        self._report(f"resumed at step {self.step}")

    # ---- cleanup -----------------------------------------------------------------------------------------------------
    def cleanup(self) -> None:
        """Best effort, each part on its own: a failure in one never leaves the others running. The Serve apps go
        first: they are the only part that outlives the driver (the actors die with it), and `ray job stop` kills
        the driver RAY_JOB_STOP_WAIT_TIME_S after its SIGTERM."""
        if self._apps:  # a refusal before setup started anything stays one line
            log.info("cleanup: deleting Serve apps %s, stopping rollout workers and trainer ranks", self._apps)
        for name in self._apps:  # start every deletion first: replicas close their fork-servers concurrently
            try:
                serve.delete(name, _blocking=False)
            except Exception as e:
                log.warning("deleting Serve app %s: %s", name, e)
        if self.pool is not None and self.pool.workers:
            try:
                asyncio.run(self.pool.stop(timeout_s=5.0))
            except Exception as e:  # keep cleaning up
                log.warning("stopping rollout workers: %s", e)
        for rank in self.ranks:
            try:
                ray.get(rank.shutdown.remote(), timeout=10)
            except Exception:  # a dead rank needs no shutdown
                pass
        for actor in [*self.ranks, *self._actors]:
            ray.kill(actor, no_restart=True)
        deadline = time.monotonic() + 60
        while self._apps and time.monotonic() < deadline and set(self._apps) & set(serve.status().applications):
            time.sleep(0.2)
        if hasattr(self, "writer"):
            self.writer.close()
        if self._started_ray:
            serve.shutdown()
            ray.shutdown()

    def summary(self, wall_s: float) -> dict[str, Any]:
        """The run in numbers; tokens/s three ways: per step, over the RL loop, end to end (setup and SFT too)."""
        from drkernel.train.checkpoint import provenance

        h = self.history
        return {
            "steps": self.step,
            "policy_versions": int(h[-1].get("trainer/version", 0.0)) if h else 0,
            "reward_mean_per_step": [m.get("rollout/reward_mean", 0.0) for m in h],
            "correct_rate_per_step": [m.get("rollout/correct_rate", 0.0) for m in h],
            "fast1_per_step": [m.get("rollout/fast1", 0.0) for m in h],
            "speedup_correct_median_per_step": [m.get("rollout/speedup_correct_median") for m in h],
            "max_staleness_observed": max((int(m["staleness/max"]) for m in h), default=0),
            "trajectories": int(sum(m.get("rollout/trajectories", 0.0) for m in h)),
            "verifier_calls": int(sum(m.get("rollout/verifier_calls", 0.0) for m in h)),
            **throughput(h, wall_s),
            **{
                f"groups_{k}": int(h[-1].get(f"groups/{k}", 0.0)) if h else 0
                for k in ("dropped_stale", "failed", "requeued_infra")
            },
            "wall_s": round(wall_s, 1),
            "sft_wall_s": round(self.sft_wall_s, 1),
            "commit": provenance()["git_commit"],
            "config_digest": config_digest(self.cfg),
            "trained_group_ids": self.trained_group_ids,
            "nodes_used": self.nodes_used,
            "output_dir": str(self.out),
        }

    def write_plots(self) -> list[Path]:
        """The run's PNGs under <output_dir>/plots (titled with the run's folder name)."""
        from drkernel.rl.rewards import reward_range
        from drkernel.train.plots import write_plots

        return write_plots(
            self.validations + self.history,
            self.out / "plots",
            run_name=self.out.name,
            reward_range=reward_range(self.cfg.algorithm.reward),
            speed_source=speed_source(self.cfg),
        )

    def _unschedulable(self) -> str:
        return self.watch.reason if self.watch is not None and self.watch.reason else "work waited for resources"

    def _raise_unschedulable(self, _signum: int, _frame: Any) -> None:
        raise JobUnschedulable(self._unschedulable())

    def _report(self, status: str) -> None:
        """The run's report.html through `on_report`; best effort: a report must never hide why the run ended."""
        if self.on_report is None or not self.out.exists():
            return
        try:
            self.on_report(self.out, status)
        except Exception as e:
            log.warning("writing the run report: %s: %s", type(e).__name__, e)

    def main(self) -> dict[str, Any]:
        """setup -> run -> cleanup; SIGTERM (ray job stop) and Ctrl-C stop at once and still clean up; work that
        waits trainer.schedule_limit_s for resources stops the job with what waited."""
        t0 = time.monotonic()
        previous = {s: signal.signal(s, raise_stopped) for s in (signal.SIGTERM, signal.SIGINT)}
        previous[STOP_SIGNAL] = signal.signal(STOP_SIGNAL, self._raise_unschedulable)
        try:
            self.setup()
            self.run()
            log.info("plots: %s", ", ".join(str(p) for p in self.write_plots()))
        except BaseException as e:
            how = "stopped" if type(e) is JobStopped else "stalled" if isinstance(e, JobStalled) else "failed"
            self._report(f"{how}: {type(e).__name__}: {e}")
            raise
        finally:
            if self.watch is not None:
                self.watch.stop()
            try:
                self.cleanup()
            finally:
                for s, handler in previous.items():
                    signal.signal(s, handler)
                if self.out.exists():  # a refusal before setup made anything names no folder
                    log.info("run folder %s", self.out)
        summary = self.summary(time.monotonic() - t0)  # end to end: setup, SFT and cleanup count
        (self.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        self._report(f"finished: {self.step} steps")
        return summary
