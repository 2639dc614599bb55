"""Training checkpoints: sharded train state, HF model + tokenizer, RNG, the run's extra state and its provenance.

Layout of one checkpoint (written to a temporary folder, then renamed, so a crash never leaves a half one):

    <root>/step_00000012/
        model/          HF save_pretrained (config, safetensors) + tokenizer: loadable by any HF/vLLM user
        state/          torch.distributed.checkpoint of {"model", "optim"}: every rank writes its own shard (no
                        rank gathers the optimizer), and any world size can load it (DCP reshards on load)
        rng.pt          torch/numpy/random (+ accelerator) RNG states (verl's BaseCheckpointManager helpers)
        extra.json      the caller's JSON-able state: data cursor, queue state, filter buffer, step, version...
        meta.json       step, resolved config, git commit, package versions, format version
    <root>/latest       name of the newest complete checkpoint

A resumed run must train the same thing: `check_compatible` allows only keys that change where or how fast
the job runs (RESUMABLE_KEYS; total_steps may grow) and refuses any other difference, naming each key.

Saving is collective when a process group is up: every rank calls `save_checkpoint` with its own shards, and
the run folder must be storage every trainer node shares.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatch
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

FORMAT_VERSION = 2
PACKAGES = ("drkernel-ray", "torch", "transformers", "ray", "verl", "triton", "numpy")

# Config keys a resumed run may change: placement, resources, logging, the finished SFT stage. Everything
# else (model shape, tokenizer, algorithm, batch sizes, rewards, learning rate, sampling) must match.
RESUMABLE_KEYS = (
    "trainer.total_steps",
    "trainer.checkpoint_every",
    "trainer.output_dir",
    "trainer.device",
    "trainer.num_workers",
    "trainer.cpus_per_worker",
    "trainer.num_threads",
    "trainer.micro_batch_size",
    "trainer.gradient_checkpointing",
    "trainer.offload_optimizer",
    "trainer.lm_head_chunk_tokens",
    "trainer.measure_update_effect",
    "trainer.stall_*",
    "trainer.schedule_*",
    "policy.engine",
    "policy.model_path",
    "policy.device",
    "policy.num_replicas",
    "policy.max_batch_size",
    "policy.batch_wait_timeout_s",
    "policy.cpus_per_replica",
    "policy.num_threads",
    "policy.app_name",
    "policy.route_prefix",
    "policy.served_model_name",
    "policy.api_token_env",
    "policy.http_*",
    "rollout.num_workers",
    "rollout.groups_per_worker",
    "rollout.cpus_per_worker",
    "rollout.sample_retries",
    "verifier.app_name",
    "verifier.device",
    "verifier.route_prefix",
    "verifier.autoscaling.*",
    "verifier.max_concurrency",
    "verifier.cpus_per_replica",
    "verifier.accelerators_per_replica",
    "verifier.max_*",
    "verifier.queue_limit",
    "verifier.deadline_s",
    "verifier.body_timeout_s",
    "verifier.retry_after_s",
    "verifier.cache_size",
    "verifier.handle_reserve",
    "verifier.replica_retries",
    "verifier.api_token_env",
    "verifier.injected_latency_s",
    "logging.*",
    "hardware.*",
    "rl_data.num_epochs",
    "rl_data.read_cpus*",
    "sft.*",
    "data.*",
    "model.output_dir",
)


class IncompatibleCheckpoint(ValueError):
    """The run's config differs from the checkpoint's in a key that changes what is trained."""


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint on disk, its metadata read."""

    path: Path
    step: int
    meta: dict[str, Any]
    extra: dict[str, Any]

    @property
    def model_dir(self) -> Path:
        return self.path / "model"

    def load_train_state(self, state: dict[str, Any]) -> None:
        """Fill `state` ({"model": ..., "optim": ...} as this rank holds them, sharded or not) in place from the
        saved shards, whatever world size wrote them (collective when a process group is up)."""
        dcp.load(state, checkpoint_id=self.path / "state")

    def restore_rng(self) -> None:
        _rng_helpers().load_rng_state(torch.load(self.path / "rng.pt", weights_only=False))


def _rng_helpers() -> Any:
    """verl's RNG state helpers (imported on use: the module pulls in verl's engine registry)."""
    from verl.utils.checkpoint.checkpoint_manager import BaseCheckpointManager

    return BaseCheckpointManager


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def config_differences(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Dotted keys whose values differ (present on one side only counts)."""
    a, b = _flatten(saved), _flatten(current)
    return sorted(k for k in set(a) | set(b) if a.get(k, "<absent>") != b.get(k, "<absent>"))


def check_compatible(saved: Mapping[str, Any], current: Mapping[str, Any], step: int) -> None:
    """Raise IncompatibleCheckpoint naming every key that may not change on resume."""
    refused = [k for k in config_differences(saved, current) if not any(fnmatch(k, p) for p in RESUMABLE_KEYS)]
    problems = []
    if refused:
        a, b = _flatten(saved), _flatten(current)
        problems += [f"{k}: checkpoint {a.get(k, '<absent>')!r}, now {b.get(k, '<absent>')!r}" for k in refused]
    total = _flatten(current).get("trainer.total_steps")
    if isinstance(total, int) and total < step:
        problems.append(f"trainer.total_steps: {total} is below the checkpoint's step {step}")
    if problems:
        raise IncompatibleCheckpoint("checkpoint config is incompatible with this run: " + "; ".join(problems))


def provenance() -> dict[str, Any]:
    """Git commit (and whether the tree was dirty) and the versions of the packages that shape training."""
    repo = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    status = git("status", "--porcelain")
    return {
        "git_commit": git("rev-parse", "HEAD"),
        "git_dirty": bool(status) if status is not None else None,
        "packages": versions,
    }


def _json_or_raise(data: Any, what: str) -> str:
    try:
        return json.dumps(data, indent=1, allow_nan=True)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what} must be JSON-able: {e}") from None


def _barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def _rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def save_checkpoint(
    root: str | Path,
    step: int,
    *,
    model: Any,
    tokenizer: Any,
    train_state: Mapping[str, Any],
    config: Mapping[str, Any],
    extra: Mapping[str, Any],
    model_state: Mapping[str, torch.Tensor] | None = None,
) -> Path | None:
    """Write checkpoint `step` under `root` and point `root/latest` at it; returns its folder on rank 0.

    Every rank calls this (collective under a process group). `train_state` is this rank's {"model", "optim"}
    (torch.distributed.checkpoint.state_dict's sharded state dicts); it is written shard by shard. `model` is the
    HF model (its config and save logic); `model_state`, when given, is the full state dict rank 0 exports instead
    of the model's own (an FSDP rank 0 passes the gathered one).
    """
    root = Path(root)
    rank = _rank()
    extra_text = _json_or_raise(dict(extra), "extra checkpoint state")
    meta = {"format": FORMAT_VERSION, "step": int(step), "config": dict(config), **provenance()}
    meta_text = _json_or_raise(meta, "config")
    name = f"step_{step:08d}"
    final, tmp = root / name, root / f".{name}.tmp"
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        (tmp / "model").mkdir(parents=True)
    _barrier()
    dcp.save(dict(train_state), checkpoint_id=tmp / "state")
    if rank != 0:
        _barrier()
        return None
    model.save_pretrained(tmp / "model", state_dict=dict(model_state) if model_state is not None else None)
    tokenizer.save_pretrained(tmp / "model")
    torch.save(_rng_helpers().get_rng_state(), tmp / "rng.pt")
    (tmp / "extra.json").write_text(extra_text)
    (tmp / "meta.json").write_text(meta_text)
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    latest_tmp = root / ".latest.tmp"
    latest_tmp.write_text(name + "\n")
    latest_tmp.replace(root / "latest")
    _barrier()  # no rank returns (and no rank's caller moves on) before the checkpoint is complete
    return final


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest complete checkpoint under `root`, or None."""
    pointer = Path(root) / "latest"
    if not pointer.is_file():
        return None
    path = Path(root) / pointer.read_text().strip()
    return path if (path / "meta.json").is_file() else None


def load_checkpoint(path: str | Path, config: Mapping[str, Any] | None = None) -> Checkpoint:
    """Read a checkpoint folder (or a root holding `latest`); refuse it when `config` is incompatible."""
    path = Path(path)
    if not (path / "meta.json").is_file():
        latest = latest_checkpoint(path)
        if latest is None:
            raise FileNotFoundError(f"no checkpoint at {path} (no meta.json and no 'latest' pointer)")
        path = latest
    meta = json.loads((path / "meta.json").read_text())
    if meta.get("format") != FORMAT_VERSION:
        raise IncompatibleCheckpoint(f"{path}: checkpoint format {meta.get('format')!r}, expected {FORMAT_VERSION}")
    for needed in ("model/config.json", "state/.metadata", "rng.pt", "extra.json"):
        if not (path / needed).exists():
            raise FileNotFoundError(f"checkpoint {path} is missing {needed}")
    if config is not None:
        check_compatible(meta["config"], config, int(meta["step"]))
    return Checkpoint(path=path, step=int(meta["step"]), meta=meta, extra=json.loads((path / "extra.json").read_text()))
