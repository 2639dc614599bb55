"""Config of the RL training job: the demo's SFT sections plus one section per runtime role.

`configs/demo_cpu.yaml` is a TrainConfig: `drkernel sft` reads its SFT sections, `drkernel train` and
`drkernel demo` read all of it. Sections mirror the actors: policy (Serve deployment + engine), rollout
(workers and the episode), queue (staleness control), trainer (optimizer, weight pushes, checkpoints),
verifier (the job's own verifier deployment), algorithm (the recipe's maths), logging.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from drkernel.config.algorithm import AlgorithmConfig
from drkernel.config.base import StrictModel
from drkernel.config.eval import EvalConfig, ValidationConfig
from drkernel.config.serve import VerifierServeConfig
from drkernel.config.sft import SFTRecipeConfig
from drkernel.config.verifier import DeviceName, VerifyOptions


class PromptDataConfig(StrictModel):
    """Where RL prompts come from; Ray Data reads, validates and length-filters them (actors/prompt_stream.py)."""

    prompt_file: str | None = Field(None, description="parquet file or folder of prompt rows; null = shipped tasks")
    prompt_style: str = Field("compact", description="first-turn prompt style when rows are built from tasks")
    seed: int = Field(0, description="seed of the per-epoch prompt order")
    num_epochs: int | None = Field(None, ge=1, description="passes over the prompts; null = until total_steps")
    skip_invalid: bool = Field(False, description="drop and count bad rows at load instead of failing the job")
    max_prompt_tokens: int | None = Field(
        None, ge=1, description="drop longer first-turn prompts; null = what fits rollout.max_context_tokens"
    )
    window_rows: int = Field(16384, ge=1, description="prompt rows read ahead of the cursor per Ray Data read")
    read_cpus: float = Field(1.0, gt=0, description="Ray CPUs of each Ray Data task reading prompt row groups")
    read_cpus_floor: float = Field(
        0.05, gt=0, description="least read_cpus the job shrinks to when the cluster has less left after its actors"
    )

    @model_validator(mode="after")
    def _floor(self) -> PromptDataConfig:
        if self.read_cpus_floor > self.read_cpus:
            raise ValueError("rl_data.read_cpus_floor must not exceed rl_data.read_cpus")
        return self


class VllmConfig(StrictModel):
    """The vLLM engine of one policy replica (engines `vllm` on CUDA and `vllm_ascend` on NPU)."""

    max_num_seqs: int = Field(256, ge=1, description="sequences the engine runs at once (continuous batching)")
    max_model_len: int | None = Field(None, ge=16, description="prompt + response tokens; null = the model's")
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1, description="device share the engine may take")
    kv_cache_memory_gb: float | None = Field(
        None, gt=0, description="KV cache size in GiB, set when trainer or verifier share the device"
    )
    enforce_eager: bool = Field(False, description="no CUDA graphs or torch.compile: faster start, slower decode")
    enable_prefix_caching: bool = Field(False, description="reuse KV of shared prefixes (off: log-prob parity)")
    seed: int = Field(0, description="the engine's sampling seed for requests without their own")
    start_timeout_s: int = Field(600, ge=10, description="engine start (load, compile, graphs) before it fails")


class PolicyConfig(StrictModel):
    """The policy deployment on Ray Serve and the engine each replica runs."""

    engine: Literal["transformers", "vllm", "vllm_ascend"] = Field("transformers", description="generation engine")
    model_path: str | None = Field(None, description="HF model folder; null = the SFT checkpoint (sft.output_dir)")
    device: DeviceName = Field("auto", description="device of each replica: auto picks cuda, then npu, then cpu")
    dtype: Literal["float32", "bfloat16"] = Field("float32", description="parameter dtype while generating")
    num_replicas: int = Field(1, ge=1, description="fixed replica count while training")
    max_batch_size: int = Field(16, ge=1, description="requests one replica batches into a generate call")
    vllm: VllmConfig = Field(default_factory=VllmConfig, description="engine settings when engine is vllm*")
    batch_wait_timeout_s: float = Field(0.05, ge=0, description="how long a replica waits to fill a batch")
    cpus_per_replica: float = Field(1.0, ge=0, description="Ray CPUs reserved by one policy replica")
    accelerators_per_replica: float = Field(1.0, gt=0, le=1, description="GPU/NPU share of one replica (<1: shared)")
    num_threads: int | None = Field(1, ge=1, description="torch CPU threads per replica; null = torch default")
    app_name: str = Field("drkernel-train-policy", min_length=1, description="Serve app name owned by this job")
    route_prefix: str = Field("/drkernel-train-policy", description="HTTP prefix of the OpenAI-compatible route")
    http_host: str = Field("127.0.0.1", description="Serve HTTP address when this job starts Serve (loopback default)")
    http_port: int = Field(8000, ge=1, le=65535, description="Serve HTTP port when this job starts Serve")
    served_model_name: str = Field("drkernel-policy", min_length=1, description="model name the HTTP route serves")
    api_token_env: str = Field("DRKERNEL_API_TOKEN", description="env var of the HTTP bearer token(s); unset = open")
    http_max_inflight: int = Field(8, ge=1, description="HTTP generations at once (503 beyond)")
    http_max_body_bytes: int = Field(1 << 20, ge=1024, description="largest HTTP request body (413 beyond)")


class RolloutConfig(StrictModel):
    """Rollout workers and the multi-turn episode they run."""

    num_workers: int = Field(1, ge=1, description="rollout worker actors")
    groups_per_worker: int = Field(2, ge=1, description="prompt groups one worker runs at once")
    samples_per_prompt: int = Field(4, ge=1, description="n: samples per prompt group (TRLOO needs >= 2)")
    max_turns: int = Field(2, ge=1, description="T: assistant turns per episode")
    max_new_tokens: int = Field(512, ge=1, description="generation budget of one turn")
    max_context_tokens: int = Field(4096, ge=64, description="prompt + all turns; an episode ends when full")
    feedback_max_tokens: int = Field(256, ge=16, description="token budget of one feedback message")
    temperature: float = Field(1.0, ge=0, description="sampling temperature")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus threshold (1 = off)")
    top_k: int = Field(0, ge=0, description="top-k (0 = off)")
    seed: int | None = Field(
        None, ge=0, description="seed each turn's sampling from (seed, group id, sample, turn); null = unseeded"
    )
    cpus_per_worker: float = Field(0.25, ge=0, description="Ray CPUs reserved by one rollout worker")
    sample_retries: int = Field(1, ge=0, description="retries of an episode that raised before its group fails")
    infra_requeues: int = Field(
        8, ge=0, description="times a group failed by infrastructure faults goes back to the line before the job stops"
    )
    min_generation_tokens: int = Field(32, ge=1, description="an episode ends when less generation room is left")
    end_on_format_error: bool = Field(False, description="end the episode at a turn without a closed code block")
    end_on_correct: bool = Field(False, description="end the episode at the first correct, honest kernel")
    max_abort_resumes: int = Field(4, ge=0, description="re-submits of a response a weight swap aborted")
    chat_model_type: str = Field("qwen3", min_length=1, description="HF model_type choosing verl's token builder")

    @model_validator(mode="after")
    def _room(self) -> RolloutConfig:
        if self.min_generation_tokens > self.max_new_tokens:
            raise ValueError("rollout.min_generation_tokens must not exceed rollout.max_new_tokens")
        return self


class QueueConfig(StrictModel):
    """Staleness control between rollouts and training (AReaL-style admission)."""

    groups_per_step: int = Field(4, ge=1, description="B: prompt groups per optimizer step")
    max_staleness: int = Field(1, ge=0, description="eta: versions a trajectory may lag; 0 = synchronous RL")
    on_violation: Literal["drop", "wait"] = Field("drop", description="a trajectory older than allowed")


class TrainerConfig(StrictModel):
    """The trainer actor(s): optimizer, weight pushes and checkpoints."""

    total_steps: int = Field(30, ge=1, description="optimizer steps of the run")
    device: DeviceName = Field("auto", description="trainer device: auto picks cuda, then npu, then cpu")
    dtype: Literal["float32", "bfloat16"] = Field(
        "float32", description="master weights, gradients and AdamW states (FSDP2's sharded parameters)"
    )
    compute_dtype: Literal["float32", "bfloat16"] | None = Field(
        None, description="parameters and activations in forward/backward (FSDP2 MixedPrecisionPolicy); null = dtype"
    )
    offload_optimizer: bool = Field(
        False,
        description="keep the sharded parameters, gradients and AdamW states on the host (FSDP2 CPUOffloadPolicy)",
    )
    lm_head_chunk_tokens: int = Field(
        1024, ge=1, description="response tokens per LM-head chunk (log-probs recomputed in backward, no full logits)"
    )
    num_workers: int = Field(1, ge=1, description="trainer ranks (FSDP2 over torch.distributed when > 1)")
    lr: float = Field(
        1e-5, ge=0, description="AdamW learning rate (constant after warmup); 0 = a control that never learns"
    )
    warmup_steps: int = Field(0, ge=0, description="linear warmup steps")
    weight_decay: float = Field(0.0, ge=0, description="AdamW decoupled weight decay")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas")
    eps: float = Field(1e-8, gt=0, description="AdamW epsilon: gradients far below it take steps far below lr")
    max_grad_norm: float = Field(1.0, gt=0, description="gradient clipping norm")
    measure_update_effect: bool = Field(
        False, description="re-score each step's batch after the update: log-prob change of +/- advantage turns"
    )
    micro_batch_size: int = Field(4, ge=1, description="sequences per forward/backward pass")
    gradient_checkpointing: bool = Field(False, description="recompute each decoder layer in backward to save memory")
    publish_every: int = Field(1, ge=1, description="k: push weights to the policy every k steps")
    bucket_mb: int = Field(512, ge=1, le=2048, description="largest weight-push bucket in MB")
    checkpoint_every: int = Field(10, ge=1, description="m: checkpoint every m steps (and at the end)")
    stall_warn_s: float = Field(120.0, gt=0, description="log why no batch arrived after this long, and as often")
    stall_limit_s: float = Field(
        1800.0, gt=0, description="stop the job, with that reason, after this long without one"
    )
    schedule_warn_s: float = Field(
        60.0, gt=0, description="report work that waits for cluster resources after this long, and as often"
    )
    schedule_limit_s: float = Field(
        3600.0, gt=0, description="stop the job when work has waited this long for resources (autoscaling, engines)"
    )
    output_dir: str | None = Field(
        None, description="the run folder (checkpoints, metrics, samples); null = a new one under ~/drkernel-runs"
    )
    cpus_per_worker: float = Field(1.0, ge=0, description="Ray CPUs reserved by one trainer rank")
    accelerators_per_worker: float = Field(1.0, gt=0, le=1, description="GPU/NPU share of one rank (<1: shared)")
    num_threads: int | None = Field(1, ge=1, description="torch CPU threads of a trainer rank")
    seed: int = Field(0, description="seed of the trainer (PRS draws, dropout)")

    @property
    def mixed_precision(self) -> bool:
        """Forward and backward in another dtype than the master weights (FSDP2 MixedPrecisionPolicy)."""
        return self.compute_dtype not in (None, self.dtype)

    @property
    def fsdp_policies(self) -> bool:
        """Mixed precision or offload: FSDP2 policies, so FSDP2 even on one rank (drkernel.train.sharding)."""
        return self.mixed_precision or self.offload_optimizer


class TrainVerifierConfig(VerifierServeConfig):
    """The job's verifier: the Serve application of `drkernel serve verifier` (the same settings, autoscaling
    between autoscaling.min_replicas and max_replicas), deployed under this job's own app name."""

    device: DeviceName = Field("cpu", description="device kind of each replica: auto picks what the cluster offers")
    app_name: str = Field("drkernel-train-verifier", min_length=1, description="Serve app name owned by this job")
    route_prefix: str | None = Field(None, description="HTTP route for users to verify kernels; null = none")
    options: VerifyOptions = Field(default_factory=VerifyOptions, description="options of every evaluation")
    injected_latency_s: float = Field(0.0, ge=0, description="benchmarks only: sleep this long before each verdict")

    def serve_config(self, device: str) -> VerifierServeConfig:
        """The Serve app's settings on the resolved `device` (cpu, cuda or npu)."""
        return VerifierServeConfig.model_validate(
            self.model_dump(include=set(VerifierServeConfig.model_fields)) | {"device": device}
        )


class ModelShapeConfig(StrictModel):
    """Shape of a Qwen3-style decoder, enough to count its parameters, activations and KV cache."""

    hidden_size: int = Field(..., ge=1, description="width of the residual stream")
    num_layers: int = Field(..., ge=1, description="decoder layers")
    num_heads: int = Field(..., ge=1, description="query heads")
    num_kv_heads: int = Field(..., ge=1, description="key/value heads (grouped-query attention)")
    head_dim: int = Field(..., ge=1, description="width of one attention head")
    intermediate_size: int = Field(..., ge=1, description="width of the SwiGLU MLP")
    vocab_size: int = Field(..., ge=1, description="rows of the embedding and the LM head")
    tie_word_embeddings: bool = Field(False, description="the LM head shares the embedding's weights")


class HardwareConfig(StrictModel):
    """What the job's memory estimate (drkernel.train.memory_estimate) checks the recipe against."""

    devices: int | None = Field(None, ge=1, description="accelerators the job may use; null = not checked")
    device_memory_gib: float | None = Field(None, gt=0, description="memory of one accelerator; null = not checked")
    model: ModelShapeConfig | None = Field(
        None, description="the policy's shape; null = the tiny model section (with tokenizer.vocab_size)"
    )


class LoggingConfig(StrictModel):
    """Where per-step metrics and trajectory samples go."""

    jsonl: bool = Field(True, description="metrics.jsonl in trainer.output_dir")
    tensorboard: bool = Field(True, description="TensorBoard event files in trainer.output_dir/tb")
    wandb: bool = Field(False, description="also log to Weights & Biases")
    wandb_project: str = Field("drkernel-ray", description="wandb project")
    report_samples_per_step: int = Field(
        8, ge=0, description="trajectories a step whose full turns go to samples.jsonl and report.html"
    )
    sample_text_chars: int = Field(
        20000, ge=100, description="longest prompt, kernel or feedback text kept per turn in samples.jsonl"
    )
    json_logs: bool = Field(False, description="log lines as JSON instead of text")
    verbose: bool = Field(False, description="keep Serve's per-request access lines and library notices (--verbose)")


class TrainConfig(SFTRecipeConfig):
    """The whole recipe: SFT warm start (inherited sections) and asynchronous multi-turn RL."""

    rl_data: PromptDataConfig = Field(default_factory=PromptDataConfig, description="RL prompts")
    policy: PolicyConfig = Field(default_factory=PolicyConfig, description="policy deployment")
    rollout: RolloutConfig = Field(default_factory=RolloutConfig, description="rollout workers and episodes")
    queue: QueueConfig = Field(default_factory=QueueConfig, description="staleness control")
    trainer: TrainerConfig = Field(default_factory=TrainerConfig, description="trainer and checkpoints")
    verifier: TrainVerifierConfig = Field(default_factory=TrainVerifierConfig, description="the job's verifier")
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig, description="the RL maths")
    logging: LoggingConfig = Field(default_factory=LoggingConfig, description="metrics and samples")
    eval: EvalConfig = Field(default_factory=EvalConfig, description="`drkernel eval` settings")
    validation: ValidationConfig = Field(default_factory=ValidationConfig, description="held-out checks in training")
    hardware: HardwareConfig = Field(default_factory=HardwareConfig, description="devices the memory estimate checks")

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        if self.rollout.max_new_tokens >= self.rollout.max_context_tokens:
            raise ValueError("rollout.max_new_tokens must be smaller than rollout.max_context_tokens")
        if self.policy.app_name == self.verifier.app_name:
            raise ValueError("policy.app_name and verifier.app_name must differ")
        per_worker = self.rollout.groups_per_worker * self.rollout.samples_per_prompt
        if per_worker > self.verifier.max_queued_requests:
            raise ValueError(
                f"a rollout worker can have {per_worker} verifications waiting (rollout.groups_per_worker x "
                f"samples_per_prompt), more than verifier.max_queued_requests ({self.verifier.max_queued_requests}) "
                "lets one caller queue: raise it"
            )
        if self.data.categories is not None and self.rl_data.prompt_file is not None:
            raise ValueError("data.categories picks the task library's prompts; rl_data.prompt_file is its own pool")
        if self.algorithm.prs.enabled and not self.verifier.options.measure_coverage:
            raise ValueError(
                "algorithm.prs rejects correct turns by their Triton time coverage, which "
                "verifier.options.measure_coverage=false never measures (it counts as 0, so every correct turn "
                "would leave the loss): set algorithm.prs.enabled=false or measure coverage"
            )
        return self
