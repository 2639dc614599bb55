"""Trainer ranks as Ray actors: build the model and optimizer on their device, train on finished groups,
publish weights to the policy replicas, save and restore checkpoints.

Every rank builds the same StepBatch from the same trajectories (the group filter and PRS generator are
replicated and deterministic) and trains on its share of rows (r, r + world, ...); FSDP2 averages the
gradients, and the loss normalisers are summed across ranks (drkernel.rl.update). Collective methods
(train_step, state_dict_for_push, publish_weights, republish, save_checkpoint, load_checkpoint, checksum) must
be called on every rank; rank 0 returns the result that matters. `create_trainer_group` starts the ranks, lets
rank 0 pick the rendezvous address and sets them all up concurrently.

The policy version has one owner: rank 0's weight publisher, which advances it only once every policy replica
acknowledged a push, then tells the trajectory queue (whose admission widens with it). The driver reads it from
rank 0's answers (`pull_batch`, `publish_weights`, `republish`), never keeps a copy of its own.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from typing import Any

import ray
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from actors.weight_sync import ReplicaSet, ServeReplicas, WeightPublisher
from drkernel.config.train import TrainConfig
from drkernel.devices import probe_availability
from drkernel.model.attention import fused_only
from drkernel.model.weights import state_checksum
from drkernel.placement import ray_options, resolve_kind
from drkernel.rl.filters import GroupVarianceFilter
from drkernel.rl.prs import prs_generator
from drkernel.rl.step_batch import (
    build_step_batch,
    filter_state_from_json,
    filter_state_to_json,
    generator_state_from_json,
    generator_state_to_json,
)
from drkernel.rl.update import ResponseScorer, train_step
from drkernel.train import checkpoint as ckpt
from drkernel.train.backend import TrainBackend, choose_backend
from drkernel.train.batch_report import batch_report
from drkernel.train.decisions import row_decisions
from drkernel.train.sharding import compute_dtype, shard_policy
from drkernel.types.group import FinishedGroup
from drkernel.types.trajectory import Trajectory
from serve_apps.runtime.run_series import TRAINER_KEYS, TRAINER_SERIES, RunGauges, run_name
from serve_apps.runtime.weight_store import weight_store

FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)
PREFIX = "policy."  # ResponseScorer holds the HF model as `policy`


def lr_at(step: int, cfg_lr: float, warmup_steps: int) -> float:
    """Linear warmup over `warmup_steps` optimizer steps, then constant (TrainerConfig)."""
    return cfg_lr * min(1.0, (step + 1) / warmup_steps) if warmup_steps else cfg_lr


def _flatten(items: Sequence[Trajectory | FinishedGroup]) -> list[Trajectory]:
    out: list[Trajectory] = []
    for item in items:
        if isinstance(item, FinishedGroup):
            out.extend(item.trajectories)
        elif isinstance(item, Trajectory):
            out.append(item)
        else:
            raise TypeError(f"train_step takes Trajectory or FinishedGroup items, got {type(item).__name__}")
    return out


class TrainerWorker:
    """One trainer rank. Construct, then `setup(master_addr, master_port)` on every rank at once."""

    def __init__(self, config: dict[str, Any], model_path: str, rank: int = 0, world_size: int = 1) -> None:
        self.cfg = TrainConfig.model_validate(config)
        self.model_path = model_path
        self.rank, self.world_size = rank, world_size
        self.backend: TrainBackend = choose_backend(
            self.cfg.trainer.device, world_size, probe_availability(), self.cfg.trainer.fsdp_policies
        )
        if self.cfg.trainer.num_threads:
            torch.set_num_threads(self.cfg.trainer.num_threads)
        self.step = 0  # optimizer updates done
        self.calls = 0  # train_step calls (skipped ones included)
        self.decisions: list[dict[str, Any]] = []  # what the last train_step did with each trajectory
        self.publisher: WeightPublisher | None = None  # rank 0's, the owner of the policy version
        self._store: Any = None  # the policy app's weight store, made by the first attach_policy
        self._queue: Any = None  # the trajectory queue, told each version the publisher advances to
        self._restored_version = 0  # a checkpoint's version, until rank 0's publisher takes it over
        self.gauges = RunGauges("trainer", TRAINER_SERIES, run_name(self.cfg.trainer.output_dir)) if rank == 0 else None

    @property
    def version(self) -> int:
        """The policy version: the last one every replica acknowledged (rank 0's publisher owns it; the driver,
        the queue and the dashboard read it from here)."""
        return self.publisher.version if self.publisher is not None else self._restored_version

    def rendezvous_address(self) -> tuple[str, int]:
        """Rank 0's address and a free port for the process group."""
        ip = ray.util.get_node_ip_address()
        with socket.socket() as s:
            s.bind((ip, 0))
            return ip, s.getsockname()[1]

    def setup(self, master_addr: str | None = None, master_port: int | None = None) -> dict[str, Any]:
        """Join the process group (if any), build model, optimizer, filter and PRS generator."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tc = self.cfg.trainer
        if self.backend.dist_backend is not None:
            if master_addr is None or master_port is None:
                raise ValueError("a multi-rank trainer needs master_addr and master_port")
            dist.init_process_group(
                self.backend.dist_backend,
                init_method=f"tcp://{master_addr}:{master_port}",
                rank=self.rank,
                world_size=self.world_size,
            )
        self.device = torch.device(self.backend.device, 0) if self.backend.device != "cpu" else torch.device("cpu")
        torch.manual_seed(tc.seed)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        self.model = AutoModelForCausalLM.from_pretrained(
            self.model_path, dtype=getattr(torch, tc.dtype), attn_implementation="sdpa"
        )
        self.model.config.use_cache = False
        if tc.gradient_checkpointing:  # non-reentrant: the form FSDP2 supports
            self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.scorer = ResponseScorer(
            self.model, tc.lm_head_chunk_tokens, fused_only(self.backend.device, compute_dtype(tc))
        )
        if self.backend.fsdp:
            shard_policy(self.scorer, list(self.model.get_decoder().layers), tc, self.backend.device, self.world_size)
        else:
            self.scorer.to(self.device)
        self.scorer.train()
        self.optimizer = torch.optim.AdamW(
            self.scorer.parameters(), lr=tc.lr, betas=tc.betas, eps=tc.eps, weight_decay=tc.weight_decay
        )
        self.group_filter = GroupVarianceFilter(
            self.cfg.algorithm.filter,
            target_groups=self.cfg.queue.groups_per_step,
            group_size=self.cfg.rollout.samples_per_prompt,
        )
        self.prs_rng = prs_generator(self.cfg.algorithm.prs.seed)
        return {
            "rank": self.rank,
            "device": str(self.device),
            "backend": self.backend.dist_backend,
            "fsdp": self.backend.fsdp,
            "pid": os.getpid(),
        }

    # ---- training -------------------------------------------------------------------------------------------------
    def train_step(self, items: Sequence[Trajectory | FinishedGroup]) -> dict[str, float]:
        """Filter, build and train on one step's groups (a Ray ObjectRef argument arrives resolved)."""
        start = time.perf_counter()
        trajectories = _flatten(items)
        held = [t for g in self.group_filter.buffered for t in g]
        batch = build_step_batch(
            trajectories,
            self.cfg.algorithm,
            self.tokenizer.pad_token_id,
            self.group_filter,
            self.prs_rng,
            max_turns=self.cfg.rollout.max_turns,
        )
        self.calls += 1
        if not batch.skipped:
            batch = batch.select(range(self.rank, batch.num_rows, self.world_size))
        tc = self.cfg.trainer
        masks: dict[str, torch.Tensor] = {}
        metrics = train_step(
            self.scorer,
            self.optimizer,
            batch,
            self.cfg.algorithm,
            micro_batch_size=tc.micro_batch_size,
            max_grad_norm=tc.max_grad_norm,
            lr=lr_at(self.step, tc.lr, tc.warmup_steps),
            temperature=self.cfg.rollout.temperature,
            dp_size=self.world_size,
            measure_effect=tc.measure_update_effect,
            masks=masks,
        )
        fc = self.cfg.algorithm.filter
        self.decisions = row_decisions(
            trajectories,
            held,
            batch,
            masks,
            stepped=bool(metrics["train/stepped"]),
            min_std=fc.min_std,
            filter_enabled=fc.enabled,
        )
        self.step += int(metrics["train/stepped"])
        if self.device.type == "cuda":  # this rank's own peak (the trainer's share of a shared GPU)
            metrics["memory/trainer_peak_gib"] = torch.cuda.max_memory_allocated(self.device) / (1 << 30)
            torch.cuda.reset_peak_memory_stats(self.device)
        metrics.update(
            {
                "trainer/step": float(self.step),
                "trainer/calls": float(self.calls),
                "trainer/version": float(self.version),
            }
        )
        self._export(metrics, step_seconds=time.perf_counter() - start)
        return metrics

    def _export(self, metrics: dict[str, float], **extra: float) -> None:
        """Rank 0's gauges on the dashboard (tagged with the run)."""
        if self.gauges is not None:
            values = {series: metrics[key] for series, key in TRAINER_KEYS.items() if key in metrics}
            self.gauges.set({**values, **extra, "version": self.version, "steps": self.step})

    def pull_batch(self, queue: Any, batch_size: int, timeout_s: float, samples: int = 0) -> dict[str, Any] | None:
        """Rank 0 takes the next batch from the trajectory queue itself and keeps it in the object store.

        Returns None when no batch was ready within `timeout_s`; else the batch's report (what the driver logs)
        and `refs`: the stored batch inside a list, so the driver passes it on to `train_pulled` without ever
        fetching it."""
        groups = ray.get(queue.get_batch.remote(batch_size, timeout_s))
        if not groups:
            return None
        report = batch_report(groups, samples, self.tokenizer.decode, self.cfg.logging.sample_text_chars)
        return {**report, "version": self.version, "refs": [ray.put(groups)]}

    def train_pulled(self, refs: list[ray.ObjectRef]) -> dict[str, float]:
        """`train_step` on the batch `pull_batch` stored; every rank fetches it from the object store."""
        return self.train_step(ray.get(refs[0]))

    def last_decisions(self) -> list[dict[str, Any]]:
        """What the last train_step did with each trajectory (drkernel.train.decisions; this rank's rows)."""
        return self.decisions

    # ---- weights ----------------------------------------------------------------------------------------------------
    def state_dict_for_push(self) -> dict[str, torch.Tensor] | None:
        """Full CPU state dict with HF names in the policy's dtype (rank 0; None on other ranks)."""
        full = get_model_state_dict(self.scorer, options=FULL)
        if self.rank != 0:
            return None
        dtype = getattr(torch, self.cfg.policy.dtype)
        return {k.removeprefix(PREFIX): v.to(dtype) if v.is_floating_point() else v for k, v in full.items()}

    def attach_policy(self, replicas: ReplicaSet | None = None, queue: Any = None) -> None:
        """Where pushes go; default: every replica of this job's policy Serve app (through broadcast). `queue`:
        the trajectory queue, told every version once every replica acknowledged it (its admission widens)."""
        if self.rank != 0:
            return
        self._queue = queue if queue is not None else self._queue
        store = None
        if replicas is None:
            from serve_apps.policy import policy_handle

            replicas = ServeReplicas(policy_handle(self.cfg.policy.app_name), self.cfg.policy.num_replicas)
            if self._store is None:  # one store for the trainer's life: a second attach (resume) must not drop
                self._store = weight_store(self.cfg.policy.app_name)  # the handle that keeps it alive
            store = self._store  # a restarted replica loads the last push from it
        self.publisher = WeightPublisher(
            replicas, bucket_mb=self.cfg.trainer.bucket_mb, version=self.version, store=store
        )

    def publish_weights(self) -> dict[str, float]:
        """Push the current weights as version + 1 to every replica (rank 0) and return the timings."""
        state = self.state_dict_for_push()
        if self.rank != 0:
            return {}
        if self.publisher is None:
            self.attach_policy()
        report = self.publisher.publish(state)
        if self._queue is not None:  # only now: the version advanced on every replica
            ray.get(self._queue.set_version.remote(self.version))
        metrics = {**report.metrics(), "trainer/version": float(self.version)}
        self._export(metrics)
        return metrics

    def republish(self) -> int:
        """A resumed job's replicas start on version 0: push the restored weights to them again under the restored
        version (nothing at version 0); returns that version. Collective, like `publish_weights`."""
        version = self.version  # every rank restored it from the same checkpoint
        if version == 0:
            return 0
        if self.rank == 0:
            if self.publisher is None:
                self.attach_policy()
            self.publisher.version = version - 1
        self.publish_weights()
        return version

    def checksum(self) -> str | None:
        """sha256 of the full weights in the policy's dtype (rank 0): equal to a replica's after a push."""
        state = self.state_dict_for_push()
        return None if state is None else state_checksum(state)

    # ---- checkpoints --------------------------------------------------------------------------------------------
    def save_checkpoint(self, root: str, extra: dict[str, Any]) -> str | None:
        """Write a checkpoint with the caller's `extra` plus the trainer's own state; returns its path (rank 0).
        Every rank writes its own model and optimizer shards; only the HF export's weights are gathered."""
        model_state = get_model_state_dict(self.scorer, options=FULL)
        train_state = {
            "model": get_model_state_dict(self.scorer),
            "optim": get_optimizer_state_dict(self.scorer, self.optimizer),
        }
        trainer_state = {
            "step": self.step,
            "calls": self.calls,
            "version": self.version,
            "filter": filter_state_to_json(self.group_filter),
            "prs_rng": generator_state_to_json(self.prs_rng),
        }
        hf_state = {k.removeprefix(PREFIX): v for k, v in model_state.items()} if self.rank == 0 else None
        path = ckpt.save_checkpoint(
            root,
            self.calls,
            model=self.model,
            tokenizer=self.tokenizer,
            train_state=train_state,
            config=self.cfg.model_dump(mode="json"),
            extra={"trainer": trainer_state, "job": extra},
            model_state=hf_state,
        )
        return None if path is None else str(path)

    def load_checkpoint(self, path: str) -> dict[str, Any]:
        """Restore weights, optimizer, RNG, filter, PRS draws, step and version; returns the caller's extra.

        The shards may come from another world size (DCP reshards them). Refuses a checkpoint whose config
        differs in a key that changes what is trained."""
        found = ckpt.load_checkpoint(path, self.cfg.model_dump(mode="json"))
        state = {
            "model": get_model_state_dict(self.scorer),
            "optim": get_optimizer_state_dict(self.scorer, self.optimizer),
        }
        found.load_train_state(state)
        set_model_state_dict(self.scorer, state["model"])
        set_optimizer_state_dict(self.scorer, self.optimizer, state["optim"])
        found.restore_rng()
        saved = found.extra["trainer"]
        filter_state_from_json(self.group_filter, saved["filter"])
        generator_state_from_json(self.prs_rng, saved["prs_rng"])
        self.step, self.calls, self._restored_version = int(saved["step"]), int(saved["calls"]), int(saved["version"])
        if self.publisher is not None:
            self.publisher.version = self._restored_version
        return found.extra["job"]

    def info(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "fsdp": self.backend.fsdp,
            "step": self.step,
            "calls": self.calls,
            "version": self.version,
            "buffered_groups": len(self.group_filter.buffered),
        }

    def shutdown(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


TrainerActor = ray.remote(TrainerWorker)


def create_trainer_group(config: TrainConfig, model_path: str) -> list[Any]:
    """Start `trainer.num_workers` ranks with their resources and set them up together; returns the handles.
    "auto" is the accelerator the cluster offers (each rank then checks that its own node has it)."""
    tc = config.trainer
    kind = resolve_kind(tc.device, ray.cluster_resources(), "trainer.device")
    options = ray_options(kind, tc.cpus_per_worker, tc.accelerators_per_worker)
    data = config.model_dump(mode="json")
    data["trainer"]["device"] = kind
    ranks = [TrainerActor.options(**options).remote(data, model_path, r, tc.num_workers) for r in range(tc.num_workers)]
    addr, port = ray.get(ranks[0].rendezvous_address.remote())  # a one-rank FSDP2 trainer needs a group too
    ray.get([r.setup.remote(addr, port) for r in ranks])
    return ranks
