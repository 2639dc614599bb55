"""How good is a policy on the task library: one answer per task, extracted and verified.

Used after SFT (the cold-start quality bar: most answers compile, many are correct) and usable on
any checkpoint. Generation is plain transformers `generate`; every answer goes through the real
verifier, so the rates are the ones RL will start from.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from drkernel.config.sft import SFTEvalConfig
from drkernel.config.verifier import VerifyOptions
from drkernel.data.prompts import extract_code, first_turn_messages
from drkernel.log import progress
from drkernel.sft.data import Messages, prompt_ids
from drkernel.types.verify_result import VerifyResult
from drkernel.verify.engine import Verifier

ERROR_CHARS = 400  # enough to see the cause; full tracebacks would swamp the records file


@dataclass
class AnswerRecord:
    """One generated answer and its verdict."""

    task: str
    mode: str
    response_tokens: int
    finished: bool
    has_code: bool
    status: str
    compiled: bool
    correct: bool
    error_kind: str | None
    error_message: str | None
    response: str

    def as_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def generate_responses(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    conversations: Sequence[Messages],
    *,
    sample: bool,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 1024,
    batch_size: int = 8,
    seed: int = 0,
) -> list[tuple[str, int, bool]]:
    """(text, token count, stopped at eos) of one response per conversation, in input order."""
    device = next(model.parameters()).device
    encoded = [prompt_ids(tokenizer, c) for c in conversations]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))  # similar lengths share a batch
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    results: list[tuple[str, int, bool] | None] = [None] * len(encoded)
    torch.manual_seed(seed)
    model.eval()
    for start in progress(range(0, len(order), batch_size), desc=f"{'sampled' if sample else 'greedy'} batches"):
        idx = order[start : start + batch_size]
        width = max(len(encoded[i]) for i in idx)
        ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, i in enumerate(idx):  # left padding: every prompt ends where generation starts
            ids[row, width - len(encoded[i]) :] = torch.tensor(encoded[i])
            mask[row, width - len(encoded[i]) :] = 1
        sampling = {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": 0}
        kwargs = sampling if sample else {"do_sample": False}
        out = model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            max_new_tokens=max_new_tokens,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=pad_id,
            **kwargs,
        )
        for row, i in enumerate(idx):
            new = out[row, width:].tolist()
            finished = tokenizer.eos_token_id in new
            if finished:
                new = new[: new.index(tokenizer.eos_token_id) + 1]
            results[i] = (tokenizer.decode(new, skip_special_tokens=True), len(new), finished)
    return results  # type: ignore[return-value]


def judge_answers(
    tasks: Sequence,
    answers: Sequence[tuple[str, int, bool]],
    mode: str,
    verifier: Verifier,
    options: VerifyOptions,
    concurrency: int = 2,
) -> list[AnswerRecord]:
    """Extract the code of each answer (task k <-> answer k) and verify it against the task's reference."""
    codes = [extract_code(text) for text, _, _ in answers]

    def judge(k: int) -> VerifyResult | None:
        return None if codes[k] is None else verifier.verify(tasks[k].reference, codes[k], options)

    with ThreadPoolExecutor(concurrency) as pool:
        verdicts = list(progress(pool.map(judge, range(len(tasks))), total=len(tasks), desc=f"{mode} verified"))
    return [
        AnswerRecord(
            task=task.name,
            mode=mode,
            response_tokens=n_tokens,
            finished=finished,
            has_code=v is not None,
            status=v.status if v else "ok",
            compiled=bool(v and v.compiled),
            correct=bool(v and v.correct),
            error_kind=(v.error.kind if v.error else None) if v else "no_code",
            error_message=v.error.message[:ERROR_CHARS] if v and v.error else None,
            response=text,
        )
        for task, (text, n_tokens, finished), v in zip(tasks, answers, verdicts, strict=True)
    ]


def _rates(records: Sequence[AnswerRecord]) -> dict:
    """Rates over answers that got a verdict; infra errors are counted apart, never as failures."""
    judged = [r for r in records if r.status == "ok"]
    n = len(judged)
    return {
        "answers": len(records),
        "judged": n,
        "infra_errors": len(records) - n,
        "has_code_rate": sum(r.has_code for r in judged) / n if n else 0.0,
        "compile_rate": sum(r.compiled for r in judged) / n if n else 0.0,
        "correct_rate": sum(r.correct for r in judged) / n if n else 0.0,
        "finished_rate": sum(r.finished for r in judged) / n if n else 0.0,
    }


def evaluate_policy(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    tasks: Sequence,
    cfg: SFTEvalConfig,
    prompt_style: str = "compact",
) -> dict:
    """Greedy (if enabled) and sampled answers for every task, verified; rates per mode plus records."""
    conversations = [first_turn_messages(t.reference, entry_point="Model", style=prompt_style) for t in tasks]
    modes = (["greedy"] if cfg.greedy else []) + (["sampled"] if cfg.temperature > 0 else [])
    options = VerifyOptions(
        device="cpu",
        timeout_s=cfg.verify_timeout_s,
        num_correct_trials=cfg.num_correct_trials,
        measure_performance=cfg.measure_performance,
        measure_coverage=cfg.measure_performance,
    )
    verifier = Verifier(device="cpu", max_concurrency=cfg.max_concurrency)
    summary: dict = {"modes": {}, "records": []}
    try:
        for mode in modes:
            answers = generate_responses(
                model,
                tokenizer,
                conversations,
                sample=mode == "sampled",
                temperature=cfg.temperature,
                top_p=cfg.top_p,
                max_new_tokens=cfg.max_new_tokens,
                batch_size=cfg.batch_size,
                seed=cfg.seed,
            )
            records = judge_answers(tasks, answers, mode, verifier, options, cfg.max_concurrency)
            summary["modes"][mode] = _rates(records)
            summary["records"].extend(r.as_dict() for r in records)
    finally:
        verifier.close()
    return summary
