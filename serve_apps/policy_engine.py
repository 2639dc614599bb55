"""Generation engines behind the policy deployment: one interface; the transformers engine (CPU and GPU) here,
the vLLM engine (CUDA, and NPU through vllm-ascend) in serve_apps/vllm_engine.py.

Every engine turns prompt token ids plus SamplingParams into sampled ids, the log-prob of each sampled id and
a finish reason, stamped with the policy version that produced all of them. Log-probs are those of the
*sampling distribution*: log_softmax of the logits after temperature, top-k and top-p, in that order (the
order transformers applies them). With temperature 1 and top_k 0 / top_p 1 (the recipe's rollout setting)
that is exactly the policy the trainer recomputes; with other settings the trainer must apply the same
processing to compare (see `processed_logprobs`). Greedy (temperature 0) reports the unscaled model's
log-prob (temperature 1, no truncation) of the argmax token, since the greedy distribution itself is a
point mass. No other logits processor ever runs: a checkpoint's generation_config.json (Qwen3 ships
top_k=20, temperature 0.6, ...) is replaced by a neutral one, and every sampling field is set explicitly,
because transformers fills unset fields from those defaults (research/verl_async_reuse.md §6).

Weight swaps never mix versions in one output: generation and weight loading share one worker thread, so a
push waits for the running batch, which finishes on the old weights with the old version; batches that
arrive after the push run on the new ones. The transformers engine therefore never reports "abort".
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LogitsProcessor,
    PreTrainedModel,
    StoppingCriteria,
)

from drkernel.config.train import PolicyConfig
from drkernel.devices import probe_availability, resolve_device
from drkernel.model.weights import state_checksum, unpack_into
from drkernel.types.sampling import GenerateOutput, SamplingParams
from drkernel.types.weights import WeightsManifest

IM_END = "<|im_end|>"
TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@runtime_checkable
class PolicyEngine(Protocol):
    """What the policy deployment needs from an engine (transformers; vLLM and vllm-ascend)."""

    batches_itself: bool
    """True when the engine batches concurrent `generate` calls itself (vLLM's continuous batching); False
    when the deployment must gather requests into `generate_batch` calls (@serve.batch)."""

    @property
    def version(self) -> int:
        """Policy version of the weights the next batch runs on (0 = the initial weights)."""
        ...

    def check_request(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> None:
        """Raise ValueError naming what is wrong with a request before it joins (and could fail) a batch."""
        ...

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> GenerateOutput:
        """One response to one prompt."""
        ...

    async def generate_batch(
        self, prompts: Sequence[list[int]], samplings: Sequence[SamplingParams]
    ) -> list[GenerateOutput]:
        """Responses to several prompts at once (the deployment's @serve.batch feeds this), in input order."""
        ...

    async def load_weights(self, version: int, buckets: Sequence[np.ndarray], manifest: WeightsManifest) -> float:
        """Copy a pushed state dict in place once the running batch is done; return the copy's seconds."""
        ...

    async def state_checksum(self) -> str:
        """sha256 of the parameters in the trainer's layout (drkernel.model.weights.state_checksum)."""
        ...

    async def check_health(self) -> None:
        """Raise when the engine can no longer serve (the replica's health check; Serve then replaces it)."""
        ...


def processed_logprobs(logits: torch.Tensor, sampling: SamplingParams) -> torch.Tensor:
    """log_softmax of `logits` after temperature, top-k and top-p: the distribution the engine samples from
    and reports log-probs of. A trainer comparing against rollouts sampled with T != 1 or truncation must use
    this; at T=1, top_k=0, top_p=1 it is plain log_softmax (temperature 0 means greedy: no scaling)."""
    scores = logits.float()
    if sampling.temperature > 0:
        scores = scores / sampling.temperature
        if sampling.top_k > 0:
            kth = torch.topk(scores, min(sampling.top_k, scores.shape[-1]), dim=-1).values[..., -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if sampling.top_p < 1.0:  # same rule as transformers' TopPLogitsWarper: drop the low tail of mass 1-p
            sorted_scores, order = torch.sort(scores, descending=False, dim=-1)
            cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
            drop = cumulative <= (1 - sampling.top_p)
            drop[..., -1:] = False
            scores = scores.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return torch.log_softmax(scores, dim=-1)


class _RowBudget(StoppingCriteria):
    """Ends each row at its own max_new_tokens, so one long budget does not keep short ones running."""

    def __init__(self, prompt_width: int, budgets: torch.Tensor) -> None:
        self.prompt_width = prompt_width
        self.budgets = budgets

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: object) -> torch.BoolTensor:
        return (input_ids.shape[1] - self.prompt_width) >= self.budgets.to(input_ids.device)


class _SeededGumbel(LogitsProcessor):
    """Per-row seeded sampling inside one batched `generate`: each row draws Gumbel noise from its own generator
    and the (greedy) argmax of log-prob + noise is a sample of that row's distribution (the Gumbel-max trick),
    so a row's tokens depend on its prompt, params and seed, not on the rows it is batched with. Keeps the clean
    log-probs of every step, since `generate`'s own scores would include the noise."""

    def __init__(self, seeds: Sequence[int], sampling: SamplingParams, device: torch.device) -> None:
        self.generators = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]
        self.sampling = sampling
        self.logprobs: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        logp = processed_logprobs(scores, self.sampling)
        self.logprobs.append(logp)
        tiny = torch.finfo(torch.float32).tiny
        uniform = torch.stack(
            [torch.rand(scores.shape[-1], generator=g, device=scores.device) for g in self.generators]
        ).clamp_min(tiny)
        return logp - torch.log(-torch.log(uniform))


def _group_key(s: SamplingParams) -> tuple:
    """Requests that can share one `generate` call: same distribution, same stop set, seeded or not (seeded
    rows are sampled with their own generators, _SeededGumbel)."""
    stops = tuple(sorted(set(s.stop_token_ids)))
    if s.temperature == 0:
        return (0.0, 0, 1.0, stops, False)  # greedy: truncation and seed change nothing
    return (s.temperature, s.top_k, s.top_p, stops, s.seed is not None)


def check_prompt(
    prompt_ids: Sequence[int], sampling: SamplingParams, vocab_size: int, max_positions: int | None, where: str
) -> None:
    """Every engine's request check: a non-empty prompt, ids inside the vocabulary, and room for the budget."""
    if not prompt_ids:
        raise ValueError("prompt_ids is empty")
    bad = [t for t in list(prompt_ids) + list(sampling.stop_token_ids) if not 0 <= int(t) < vocab_size]
    if bad:
        raise ValueError(f"token ids outside the vocabulary [0, {vocab_size}): {bad[:5]}")
    if max_positions and len(prompt_ids) + sampling.max_new_tokens > max_positions:
        raise ValueError(
            f"prompt ({len(prompt_ids)}) + max_new_tokens ({sampling.max_new_tokens}) exceeds "
            f"{where} {max_positions} positions"
        )


def stop_ids_of(tokenizer: Any) -> list[int]:
    """The ids every response stops on: the tokenizer's eos and, when the vocabulary has it, <|im_end|>."""
    stops = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    im_end = tokenizer.convert_tokens_to_ids(IM_END) if IM_END in tokenizer.get_vocab() else None
    return stops + ([im_end] if im_end is not None else [])


class TransformersEngine:
    """Padded batched `generate` on one device; log-probs via compute_transition_scores(normalize_logits=True).

    Requests of one call are grouped by sampling key (temperature, top-k, top-p, stop ids, seeded or not); each
    group is one left-padded `generate`. Seeded requests are batched too, each row sampling from its own
    generator (_SeededGumbel), so the same prompt, params and seed give the same tokens however requests happen
    to be batched (log-probs equal up to the float rounding of a different batch shape).
    """

    batches_itself = False

    def __init__(
        self, model: PreTrainedModel, stop_token_ids: Sequence[int], pad_token_id: int, version: int = 0
    ) -> None:
        if not stop_token_ids:
            raise ValueError("the engine needs at least one stop token id (the tokenizer's eos)")
        self.model = model.eval()
        self.device = next(model.parameters()).device
        self.stop_token_ids = sorted(set(int(t) for t in stop_token_ids))
        self.pad_token_id = int(pad_token_id)
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.max_positions = getattr(model.config, "max_position_embeddings", None)
        # a neutral config: nothing from the checkpoint's generation_config.json can add a logits processor
        model.generation_config = GenerationConfig(
            eos_token_id=self.stop_token_ids, pad_token_id=self.pad_token_id, bos_token_id=None
        )
        self._version = version
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="policy-engine")

    @classmethod
    def from_pretrained(
        cls, model_path: str, device: str = "auto", dtype: str = "float32", num_threads: int | None = None
    ) -> TransformersEngine:
        """Load an HF checkpoint folder (model + tokenizer) onto `device`; stops on eos and <|im_end|>."""
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        where = resolve_device(device, probe_availability())
        if where == "npu":
            raise ValueError("the transformers engine runs on cpu or cuda; use engine 'vllm_ascend' for npu")
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=TORCH_DTYPES[dtype]).to(where)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        return cls(model, stop_ids_of(tokenizer), pad)

    @property
    def version(self) -> int:
        return self._version

    def check_request(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> None:
        """Raise ValueError naming what is wrong with a request, before it can join (and fail) a batch."""
        check_prompt(prompt_ids, sampling, self.vocab_size, self.max_positions, "the model's")

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> GenerateOutput:
        return (await self.generate_batch([prompt_ids], [sampling]))[0]

    async def generate_batch(
        self, prompts: Sequence[list[int]], samplings: Sequence[SamplingParams]
    ) -> list[GenerateOutput]:
        if len(prompts) != len(samplings):
            raise ValueError(f"{len(prompts)} prompts but {len(samplings)} sampling params")
        for p, s in zip(prompts, samplings):
            self.check_request(p, s)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, self.generate_sync, list(prompts), list(samplings))

    def generate_sync(self, prompts: list[list[int]], samplings: list[SamplingParams]) -> list[GenerateOutput]:
        """The blocking batch: one `generate` per sampling group, input order kept."""
        version = self._version  # read once: weights cannot change while this thread runs
        groups: dict[tuple, list[int]] = defaultdict(list)
        for i, s in enumerate(samplings):
            groups[_group_key(s)].append(i)
        results: list[GenerateOutput | None] = [None] * len(prompts)
        for key, idx in groups.items():
            outs = self._generate_group([prompts[i] for i in idx], [samplings[i] for i in idx], key, version)
            for i, out in zip(idx, outs):
                results[i] = out
        return results  # type: ignore[return-value]

    @torch.no_grad()
    def _generate_group(
        self, prompts: list[list[int]], samplings: list[SamplingParams], key: tuple, version: int
    ) -> list[GenerateOutput]:
        temperature, top_k, top_p, extra_stops, seeded = key
        stops = sorted(set(self.stop_token_ids) | set(extra_stops))
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, p in enumerate(prompts):  # left padding: every row's next token is at the same column
            ids[row, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[row, width - len(p) :] = 1
        budgets = torch.tensor([s.max_new_tokens for s in samplings])
        greedy = temperature == 0
        gumbel = _SeededGumbel([s.seed for s in samplings], samplings[0], self.device) if seeded else None
        config = GenerationConfig(
            do_sample=not (greedy or seeded),  # seeded: _SeededGumbel samples, the argmax picks its draw
            temperature=1.0 if greedy or seeded else temperature,
            top_k=None if greedy or seeded else top_k,  # warpers off: None avoids transformers' warning
            top_p=1.0 if greedy or seeded else top_p,
            min_p=None,
            typical_p=1.0,
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            min_new_tokens=None,
            min_length=0,
            max_new_tokens=int(budgets.max()),
            eos_token_id=stops,
            pad_token_id=self.pad_token_id,
            output_scores=not seeded,
            return_dict_in_generate=True,
        )
        out = self.model.generate(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            generation_config=config,
            stopping_criteria=[_RowBudget(width, budgets)],
            logits_processor=[gumbel] if gumbel else None,
        )
        if gumbel:
            chosen = out.sequences[:, width:]
            scores = torch.stack(gumbel.logprobs, dim=1).gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
        else:
            scores = self.model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
        new_ids = out.sequences[:, width:].tolist()
        new_lp = scores.float().cpu().tolist()
        stop_set = set(stops)
        results = []
        for row, s in enumerate(samplings):
            tokens, finish = new_ids[row][: s.max_new_tokens], "length"
            for j, t in enumerate(tokens):
                if t in stop_set:
                    tokens, finish = tokens[: j + 1], "stop"
                    break
            results.append(
                GenerateOutput(
                    token_ids=tokens, logprobs=new_lp[row][: len(tokens)], finish_reason=finish, version=version
                )
            )
        return results

    async def load_weights(self, version: int, buckets: Sequence[np.ndarray], manifest: WeightsManifest) -> float:
        """Queued behind the running batch on the engine's one worker thread, so no output mixes versions."""
        if manifest.version != version:
            raise ValueError(f"load_weights(version={version}) got a manifest for version {manifest.version}")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, self._load_sync, version, buckets, manifest)

    def _load_sync(self, version: int, buckets: Sequence[np.ndarray], manifest: WeightsManifest) -> float:
        if version <= self._version:
            raise ValueError(f"version {version} is not newer than the loaded version {self._version}")
        start = time.perf_counter()
        unpack_into(self.model.state_dict(), buckets, manifest)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self._version = version
        return time.perf_counter() - start

    async def state_checksum(self) -> str:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, lambda: state_checksum(self.model.state_dict()))

    async def check_health(self) -> None:
        """The engine lives in this process: alive while the replica is."""

    def close(self) -> None:
        self._worker.shutdown(wait=False, cancel_futures=True)


def make_engine(cfg: PolicyConfig, model_path: str) -> PolicyEngine:
    """The engine `cfg.engine` names, loaded from `model_path` on `cfg.device`."""
    if cfg.engine == "transformers":
        return TransformersEngine.from_pretrained(model_path, cfg.device, cfg.dtype, cfg.num_threads)
    from serve_apps.vllm_engine import VllmEngine  # vllm and vllm_ascend: one class, the platform plugin differs

    return VllmEngine.from_pretrained(model_path, cfg)
