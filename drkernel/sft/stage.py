"""The cold-start SFT stage end to end: data, base model, training, HF checkpoint, evaluation.

Without `sft.base_model` it first builds the tiny policy (tokenizer trained on the same corpus, then
a seeded Qwen3) so the embedded default needs nothing from the network. With a base model it
fine-tunes that checkpoint as it is, on any device.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from drkernel.config.sft import SFTRecipeConfig
from drkernel.log import get_logger
from drkernel.model.tiny import save_tiny_base
from drkernel.sft.data import SFTInputError, corpus_texts, encode_pairs, parquet_pairs, task_pairs
from drkernel.sft.feedback import feedback_options, feedback_pairs
from drkernel.sft.trainer import StepLog, torch_device, train_sft
from drkernel.sft.warm_start import with_sft_paths
from drkernel.tasks import Task, load_tasks

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
_log = get_logger("sft")


def _loss_curve(history: list[StepLog], points: int = 8) -> list[dict]:
    """A few evenly spaced steps of the loss curve, first and last included."""
    if not history:
        return []
    picks = sorted({round(i * (len(history) - 1) / (points - 1)) for i in range(points)})
    return [
        {"step": history[i].step, "epoch": round(history[i].epoch, 2), "loss": round(history[i].loss, 4)} for i in picks
    ]


def _evaluate(model, tokenizer, tasks, cfg: SFTRecipeConfig, out: Path, log: Callable[[str], None]) -> dict:
    """Sample and verify one answer per task; records go to `<out>/eval_records.jsonl`."""
    from drkernel.sft.evaluate import evaluate_policy  # imports the verifier only when evaluating

    t0 = time.monotonic()
    result = evaluate_policy(model, tokenizer, tasks, cfg.sft.eval, cfg.data.prompt_style)
    (out / "eval_records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in result["records"]))
    for mode, rates in result["modes"].items():
        log(
            f"eval {mode}: compile {rates['compile_rate']:.0%} correct {rates['correct_rate']:.0%} of {rates['judged']}"
        )
    return {"eval": result["modes"], "eval_wall_s": round(time.monotonic() - t0, 1)}


def _device_and_tasks(cfg: SFTRecipeConfig) -> tuple[torch.device, list[Task]]:
    """Thread count, the resolved device and the task library, shared by training and evaluation."""
    if cfg.sft.num_threads is not None:
        torch.set_num_threads(cfg.sft.num_threads)
    try:
        device = torch_device(cfg.sft.device)
    except ValueError as e:
        raise SFTInputError(str(e)) from None
    return device, load_tasks(Path(cfg.data.tasks_dir) if cfg.data.tasks_dir else None, cfg.data.categories)


def evaluate_checkpoint(cfg: SFTRecipeConfig, checkpoint: str | Path, log: Callable[[str], None] = _log.info) -> dict:
    """Evaluate an existing HF checkpoint on the task library; writes `<checkpoint>/eval.json`."""
    path = Path(checkpoint)
    if not path.is_dir():
        raise SFTInputError(f"checkpoint {path} is not a folder")
    device, tasks = _device_and_tasks(cfg)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=DTYPES[cfg.sft.dtype]).to(device)
    summary = {
        "checkpoint": str(path),
        "device": str(device),
        "threads": torch.get_num_threads(),
        **_evaluate(model, tokenizer, tasks, cfg, path, log),
        "eval_config": cfg.sft.eval.model_dump(),
    }
    (path / "eval.json").write_text(json.dumps(summary, indent=2))
    return summary


def run_sft_stage(cfg: SFTRecipeConfig, log: Callable[[str], None] = _log.info) -> dict:
    """Run the stage described by `cfg`; returns the summary also written to `<output_dir>/summary.json` (an unset
    output_dir is the cache folder of these settings, drkernel/sft/warm_start.py)."""
    cfg = with_sft_paths(cfg)
    device, tasks = _device_and_tasks(cfg)
    out = Path(cfg.sft.output_dir)
    pairs = parquet_pairs(cfg.data.sft_file) if cfg.data.sft_file else task_pairs(tasks, cfg.data.prompt_style)
    if not pairs:
        raise SFTInputError("no SFT pairs: the task library or SFT file is empty")
    if cfg.data.feedback_turns:
        options = feedback_options(cfg.sft.eval.num_correct_trials, cfg.sft.eval.verify_timeout_s)
        second = feedback_pairs(tasks, cfg.data.prompt_style, options, cfg.sft.eval.max_concurrency, log)
        log(f"{len(second)} second-turn examples from the verifier's feedback on the simple solutions")
        pairs += second

    base = cfg.sft.base_model
    if base is None:
        base = str(save_tiny_base(cfg.model, cfg.tokenizer, corpus_texts(pairs), cfg.model.output_dir))
        log(f"built tiny base model at {base}")
    elif not Path(base).is_dir():
        raise SFTInputError(f"sft.base_model {base} is not a folder")
    tokenizer = AutoTokenizer.from_pretrained(base)
    if not tokenizer.chat_template:
        raise SFTInputError(f"the tokenizer of {base} has no chat template")
    model = AutoModelForCausalLM.from_pretrained(base, dtype=DTYPES[cfg.sft.dtype]).to(device)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    examples, dropped = encode_pairs(tokenizer, pairs, cfg.data.max_length)
    if not examples:
        raise SFTInputError(f"all {len(pairs)} examples exceed data.max_length={cfg.data.max_length}")
    if dropped:
        log(f"left out {len(dropped)} examples longer than {cfg.data.max_length} tokens: {', '.join(dropped[:5])}")
    lengths = [len(e.input_ids) for e in examples]
    log(f"SFT on {len(examples)} examples ({sum(lengths)} tokens, longest {max(lengths)}) on {device}")

    out.mkdir(parents=True, exist_ok=True)
    metrics_path = out / "metrics.jsonl"
    with metrics_path.open("w") as metrics:

        def on_step(entry: StepLog) -> None:
            metrics.write(json.dumps(entry.as_dict()) + "\n")
            metrics.flush()
            if entry.step == 1 or entry.step % cfg.sft.log_every == 0:
                log(
                    f"step {entry.step} epoch {entry.epoch:.2f} loss {entry.loss:.4f} lr {entry.lr:.2e}"
                    f" ({entry.elapsed_s:.0f}s)"
                )

        t0 = time.monotonic()
        history = train_sft(model, examples, cfg.sft, pad_id, log=on_step)
        train_wall = time.monotonic() - t0
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    log(f"saved the SFT checkpoint to {out} ({train_wall:.0f}s of training)")

    summary: dict = {
        "base_model": base,
        "checkpoint": str(out),
        "device": str(device),
        "threads": torch.get_num_threads(),
        "machine": f"{platform.node()} {platform.machine()}",
        "examples": len(examples),
        "dropped_examples": dropped,
        "tokens_per_epoch": sum(lengths),
        "steps": len(history),
        "final_loss": history[-1].loss,
        "loss_curve": _loss_curve(history),
        "train_wall_s": round(train_wall, 1),
    }
    if cfg.sft.eval.enabled:
        summary.update(_evaluate(model, tokenizer, tasks, cfg, out, log))
    summary["config"] = cfg.model_dump(mode="json")
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
