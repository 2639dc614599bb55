"""The vLLM engine behind the PolicyEngine protocol (CUDA with `vllm`; NPU with the vllm-ascend plugin).

vLLM's AsyncLLM batches continuously: each request is added on arrival and leaves when it finishes, so the
replica calls `generate` per request (no @serve.batch). Prompts are token ids (no tokenizer in the engine);
each sampled token's log-prob comes from vLLM's `processed_logprobs` mode with `logprobs=0`, i.e. the
log-prob of the sampled id under the distribution after temperature, top-k and top-p, indexed by that id:
the same quantity TransformersEngine reports (serve_apps/policy_engine.py). The checkpoint's
generation_config.json is ignored (`generation_config="vllm"`) and every sampling field is explicit.

Weight pushes never mix versions in one output. A push closes the admission gate, waits until every admitted
request has reached the engine's input, pauses the engine with `abort` (running requests end with
finish_reason "abort" and the tokens and log-probs sampled so far, stamped with the old version: the
episode loop re-submits from there), loads the buckets through shared memory (serve_apps/vllm_worker.py),
bumps the version, resumes and reopens the gate. Requests that arrive meanwhile wait at the gate and run on
the new weights with the new version.

AsyncLLM runs its engine in a child process. A child that dies makes every call raise vLLM's
EngineDeadError and `check_health` fail, so Serve replaces the replica; a child that never becomes ready
fails the replica's start after `vllm.start_timeout_s` (VLLM_ENGINE_READY_TIMEOUT_S). A push that fails
half way leaves the engine marked broken (health check fails), never serving a half-loaded model.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Sequence
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from drkernel.config.train import PolicyConfig
from drkernel.types.sampling import GenerateOutput, SamplingParams
from drkernel.types.weights import WeightsManifest
from serve_apps.policy_engine import check_prompt, stop_ids_of
from serve_apps.vllm_worker import SHM_PREFIX

DEVICE_OF_ENGINE = {"vllm": "cuda", "vllm_ascend": "npu"}
EXTENSION = "serve_apps.vllm_worker.WeightLoaderExtension"
FINISH_REASONS = {"stop": "stop", "length": "length", "abort": "abort"}


class EngineBroken(RuntimeError):
    """A weight push failed half way: the engine holds a mix of versions and must be replaced."""


def engine_args(cfg: PolicyConfig, model_path: str) -> dict[str, Any]:
    """vLLM AsyncEngineArgs fields for one replica (plain values, so they are testable without vLLM)."""
    v = cfg.vllm
    args: dict[str, Any] = {
        "model": model_path,
        "skip_tokenizer_init": True,
        "dtype": cfg.dtype,
        "seed": v.seed,
        "max_num_seqs": v.max_num_seqs,
        "gpu_memory_utilization": v.gpu_memory_utilization,
        "enforce_eager": v.enforce_eager,
        "enable_prefix_caching": v.enable_prefix_caching,
        "logprobs_mode": "processed_logprobs",
        "generation_config": "vllm",
        "worker_extension_cls": EXTENSION,
        "disable_log_stats": True,
    }
    if v.max_model_len is not None:
        args["max_model_len"] = v.max_model_len
    if v.kv_cache_memory_gb is not None:
        args["kv_cache_memory_bytes"] = int(v.kv_cache_memory_gb * (1 << 30))
    return args


def check_engine_device(engine: str, device: str) -> None:
    """vLLM runs on CUDA, vllm-ascend on NPU; anything else is a config error named before loading."""
    want = DEVICE_OF_ENGINE[engine]
    if device != want:
        raise ValueError(
            f"policy.engine {engine!r} runs on {want}, but policy.device resolves to {device!r} here; "
            f"use engine 'transformers' on {device}"
        )


def import_vllm(engine: str) -> tuple[type, type]:
    """vLLM's AsyncEngineArgs and AsyncLLM, or an error that says which extra installs them."""
    try:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM
    except ImportError as e:
        how = (
            "requirements-npu.txt (README: Running on Ascend)"
            if engine == "vllm_ascend"
            else "pip install -e '.[cuda]'"
        )
        raise RuntimeError(
            f"policy.engine {engine!r} needs vLLM, which is not importable here ({e}); install it with "
            f"{how} on every node that hosts a policy replica"
        ) from e
    return AsyncEngineArgs, AsyncLLM


class _Staging:
    """One reused POSIX shared-memory segment per bucket index, sized to the bucket (resized when it grows)."""

    def __init__(self) -> None:
        self._segments: dict[int, shared_memory.SharedMemory] = {}

    def put(self, index: int, bucket: np.ndarray) -> tuple[str, int]:
        data = np.frombuffer(memoryview(bucket).cast("B"), dtype=np.uint8)
        shm = self._segments.get(index)
        if shm is None or shm.size < data.nbytes:
            if shm is not None:
                shm.close()
                shm.unlink()
            name = f"{SHM_PREFIX}{os.getpid()}-{index}-{uuid.uuid4().hex[:8]}"
            shm = self._segments[index] = shared_memory.SharedMemory(name=name, create=True, size=max(data.nbytes, 1))
        np.copyto(np.ndarray((data.nbytes,), dtype=np.uint8, buffer=shm.buf), data)
        return shm.name, data.nbytes

    def close(self) -> None:
        for shm in self._segments.values():
            shm.close()
            shm.unlink()
        self._segments.clear()


class VllmEngine:
    """AsyncLLM with token-id prompts, sampled-token log-probs, version stamps and in-place weight loads."""

    batches_itself = True

    def __init__(
        self, llm: Any, stop_token_ids: Sequence[int], vocab_size: int, max_model_len: int, version: int = 0
    ) -> None:
        if not stop_token_ids:
            raise ValueError("the engine needs at least one stop token id (the tokenizer's eos)")
        self.llm = llm
        self.stop_token_ids = sorted(set(int(t) for t in stop_token_ids))
        self.vocab_size = vocab_size
        self.max_model_len = max_model_len
        self._version = version
        self._gate = asyncio.Event()
        self._gate.set()
        self._admitting = 0  # requests past the gate whose add has not reached the engine yet
        self._added = asyncio.Condition()
        self._load_lock = asyncio.Lock()
        self._staging = _Staging()
        self._layout: dict[str, tuple[str, tuple[int, ...]]] | None = None
        self._broken: str | None = None

    @classmethod
    def from_pretrained(cls, model_path: str, cfg: PolicyConfig) -> VllmEngine:
        """Start AsyncLLM on `model_path` (engine child process); stops on eos and <|im_end|>."""
        from drkernel.devices import probe_availability, resolve_device

        check_engine_device(cfg.engine, resolve_device(cfg.device, probe_availability()))
        AsyncEngineArgs, AsyncLLM = import_vllm(cfg.engine)
        from transformers import AutoConfig, AutoTokenizer

        os.environ["VLLM_ENGINE_READY_TIMEOUT_S"] = str(cfg.vllm.start_timeout_s)
        # fork after torch's CPU thread pool ran deadlocks the engine child in its first pinned buffer
        # (benchmarks/vllm_start_probe.py, H200): always spawn it
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
        hf = AutoConfig.from_pretrained(model_path)
        try:
            stops = stop_ids_of(AutoTokenizer.from_pretrained(model_path))
        except (OSError, ValueError):  # a weights-only folder (benchmarks): the config's eos ids
            eos = hf.eos_token_id
            stops = [eos] if isinstance(eos, int) else list(eos or [])
        llm = AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_args(cfg, model_path)))
        max_len = int(llm.vllm_config.model_config.max_model_len)
        return cls(llm, stops, int(hf.vocab_size), max_len)

    @property
    def version(self) -> int:
        return self._version

    def check_request(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> None:
        check_prompt(prompt_ids, sampling, self.vocab_size, self.max_model_len, "the engine's max_model_len of")

    def _sampling(self, s: SamplingParams) -> Any:
        from vllm.sampling_params import RequestOutputKind
        from vllm.sampling_params import SamplingParams as VllmSampling

        return VllmSampling(
            n=1,
            temperature=s.temperature,
            top_p=s.top_p,
            top_k=s.top_k,
            min_p=0.0,
            presence_penalty=0.0,
            frequency_penalty=0.0,
            repetition_penalty=1.0,
            min_tokens=0,
            seed=s.seed,
            max_tokens=s.max_new_tokens,
            stop_token_ids=sorted(set(self.stop_token_ids) | set(s.stop_token_ids)),
            ignore_eos=False,
            logprobs=0,
            detokenize=False,
            skip_special_tokens=False,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )

    def _raise_if_broken(self) -> None:
        if self._broken:
            raise EngineBroken(self._broken)

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> GenerateOutput:
        from vllm.inputs import TokensPrompt

        self.check_request(prompt_ids, sampling)
        params = self._sampling(sampling)
        await self._gate.wait()
        self._raise_if_broken()
        version = self._version
        self._admitting += 1
        try:
            collector = await self.llm.add_request(
                uuid.uuid4().hex, TokensPrompt(prompt_token_ids=[int(t) for t in prompt_ids]), params
            )
        finally:
            self._admitting -= 1
            async with self._added:
                self._added.notify_all()
        try:
            out = collector.get_nowait() or await collector.get()
            while not out.finished:
                out = collector.get_nowait() or await collector.get()
        except asyncio.CancelledError:
            await self.llm.abort(collector.request_id, internal=True)
            raise
        finally:
            collector.close()
        return self._output(out.outputs[0], version)

    @staticmethod
    def _output(completion: Any, version: int) -> GenerateOutput:
        reason = FINISH_REASONS.get(str(completion.finish_reason))
        if reason is None:
            raise RuntimeError(f"vLLM ended a request with finish_reason {completion.finish_reason!r}")
        tokens = list(completion.token_ids)
        positions = completion.logprobs or []
        if len(positions) != len(tokens):
            raise RuntimeError(f"vLLM returned {len(positions)} log-prob entries for {len(tokens)} tokens")
        logprobs = [float(pos[t].logprob) for t, pos in zip(tokens, positions)]
        return GenerateOutput(token_ids=tokens, logprobs=logprobs, finish_reason=reason, version=version)

    async def generate_batch(
        self, prompts: Sequence[list[int]], samplings: Sequence[SamplingParams]
    ) -> list[GenerateOutput]:
        if len(prompts) != len(samplings):
            raise ValueError(f"{len(prompts)} prompts but {len(samplings)} sampling params")
        for p, s in zip(prompts, samplings):
            self.check_request(p, s)
        return list(await asyncio.gather(*(self.generate(list(p), s) for p, s in zip(prompts, samplings))))

    async def _trainer_layout(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        if self._layout is None:
            rows = (await self.llm.collective_rpc("drkernel_layout"))[0]
            self._layout = {name: (dtype, tuple(shape)) for name, dtype, shape in rows}
        return self._layout

    async def _check_manifest(self, manifest: WeightsManifest) -> None:
        """The same refusal as unpack_into: a push must name exactly the model's tensors, shapes and dtypes."""
        layout = await self._trainer_layout()
        names = {s.name for s in manifest.slots}
        if names != set(layout):
            missing, extra = sorted(set(layout) - names), sorted(names - set(layout))
            raise ValueError(f"weight push does not match the model: missing {missing[:5]}, unexpected {extra[:5]}")
        for s in manifest.slots:
            if layout[s.name] != (s.dtype, s.shape):
                raise ValueError(f"{s.name}: model has {layout[s.name]}, push has {(s.dtype, s.shape)}")

    async def load_weights(self, version: int, buckets: Sequence[np.ndarray], manifest: WeightsManifest) -> float:
        """Pause (abort in-flight requests), load every bucket through shared memory, resume; returns seconds
        from the pause to the resume."""
        if manifest.version != version:
            raise ValueError(f"load_weights(version={version}) got a manifest for version {manifest.version}")
        if len(buckets) != len(manifest.bucket_nbytes):
            raise ValueError(f"{len(buckets)} buckets received, manifest lists {len(manifest.bucket_nbytes)}")
        for i, (bucket, nbytes) in enumerate(zip(buckets, manifest.bucket_nbytes)):
            if memoryview(bucket).nbytes != nbytes:
                raise ValueError(f"bucket {i} holds {memoryview(bucket).nbytes} bytes, manifest says {nbytes}")
        async with self._load_lock:
            self._raise_if_broken()
            if version <= self._version:
                raise ValueError(f"version {version} is not newer than the loaded version {self._version}")
            await self._check_manifest(manifest)
            self._gate.clear()
            try:
                async with self._added:
                    await self._added.wait_for(lambda: self._admitting == 0)
                start = time.perf_counter()
                await self.llm.pause_generation(mode="abort", clear_cache=True)
                try:
                    await self._load(buckets, manifest)
                except BaseException as e:
                    self._broken = f"weight push of version {version} failed half way: {type(e).__name__}: {e}"
                    raise EngineBroken(self._broken) from e
                self._version = version
                await self.llm.resume_generation()
                return time.perf_counter() - start
            finally:
                self._gate.set()

    async def _load(self, buckets: Sequence[np.ndarray], manifest: WeightsManifest) -> None:
        by_bucket: dict[int, list[list[Any]]] = {}
        for s in manifest.slots:
            by_bucket.setdefault(s.bucket, []).append([s.name, s.dtype, list(s.shape), s.offset, s.nbytes])
        await self.llm.collective_rpc("drkernel_begin_load")
        loop = asyncio.get_running_loop()
        for i, bucket in enumerate(buckets):
            name, nbytes = await loop.run_in_executor(None, self._staging.put, i, bucket)
            await self.llm.collective_rpc("drkernel_load_shm", args=(name, nbytes, by_bucket.get(i, [])))
        await self.llm.collective_rpc("drkernel_finish_load")

    async def state_checksum(self) -> str:
        async with self._load_lock:
            return (await self.llm.collective_rpc("drkernel_checksum"))[0]

    async def check_health(self) -> None:
        """Raise when the engine child is dead or a push left the weights half loaded (Serve then replaces it)."""
        self._raise_if_broken()
        await self.llm.check_health()

    def close(self) -> None:
        self._staging.close()
        self.llm.shutdown()
