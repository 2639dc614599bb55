"""Device memory a training recipe needs, per trainer rank and per policy replica, before any device is touched.

An 8B recipe that cannot fit should fail in `--dry-run`, naming the numbers, not an hour into a job with a
device OOM. The counts follow what this project's code does (actors/trainer.py, drkernel/rl/update.py,
serve_apps/vllm_engine.py), not a general model of every framework:

trainer rank (W = trainer.num_workers ranks, P parameters; e: bytes of trainer.dtype, the master weights;
c: bytes of the compute dtype, trainer.compute_dtype or e; T = micro_batch_size * max_context_tokens tokens,
R = micro_batch_size * max_new_tokens response tokens, h hidden, V vocabulary, E = embedding (+ LM head)):
    resident between steps (drkernel.train.sharding; on the host with trainer.offload_optimizer)
        parameters                 P * e / W
        AdamW states               2 * P * e / W    (torch keeps exp_avg and exp_avg_sq in the parameter dtype)
    a step adds, at its largest moment (the largest of three, the others in the notes):
        gathered weights           FSDP2 (W > 1, mixed precision or offload): the root group E * c, kept through
                                   forward and backward, + two decoder layers * c (one prefetched)
        layer inputs               gradient checkpointing: L * T * h * c; without: every layer's saved tensors
        LM head backward           the response hidden states and their gradient 2 * R * h * c, one chunk of
                                   logits in fp32 with its softmax, one-hot and gradient (4 * chunk * V * 4), the
                                   LM head's gradient V * h * c (verl's FusedLinearForPPO)
        a layer's backward         its recomputed saved tensors T * c * (4h + 2q + 2kv + 4i) (norm in/out x2, q,
                                   k, v, attention out; MLP gate, up, act(gate), product), as much again for
                                   their gradients, the residual stream's gradient T * h * c
        end of backward            every sharded gradient P * e / W, the root group's unsharded gradient E * c
                                   and, over several ranks, its fp32 copy for the reduce-scatter (mixed precision)
        optimizer step             the gradients and foreach AdamW's temporaries, as large again
    attention: fused SDPA kernels keep O(S) per head; fp32 compute with grouped-query attention on an accelerator
    takes PyTorch's math kernel, whose [heads, S, S] scores and probabilities (x micro-batch, fp32) are counted
    in a layer's backward (drkernel.model.attention)
policy replica:
    vLLM engines    weights P * e, and the KV cache is what gpu_memory_utilization * device memory leaves (or
                    vllm.kv_cache_memory_gb); it must hold one max_model_len sequence or vLLM refuses to start
    transformers    weights P * e + KV for max_batch_size sequences of max_context_tokens

Every figure is an estimate (allocator slack, NCCL/HCCL buffers, CUDA graphs and vLLM's own activations are not
counted); a config is refused only when an estimate already exceeds what the device has.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from drkernel.config.train import ModelShapeConfig, TrainConfig

GIB = 1 << 30
DTYPE_BYTES = {"float32": 4, "bfloat16": 2}


def model_shape(cfg: TrainConfig) -> ModelShapeConfig:
    """The policy's shape: hardware.model, else the tiny model the demo builds."""
    if cfg.hardware.model is not None:
        return cfg.hardware.model
    m = cfg.model
    return ModelShapeConfig(
        hidden_size=m.hidden_size,
        num_layers=m.num_layers,
        num_heads=m.num_heads,
        num_kv_heads=m.num_kv_heads,
        head_dim=m.head_dim,
        intermediate_size=m.intermediate_size,
        vocab_size=m.vocab_size or cfg.tokenizer.vocab_size,
        tie_word_embeddings=m.tie_word_embeddings,
    )


HF_KEYS = {
    "hidden_size": "hidden_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "num_kv_heads": "num_key_value_heads",
    "head_dim": "head_dim",
    "intermediate_size": "intermediate_size",
    "vocab_size": "vocab_size",
    "tie_word_embeddings": "tie_word_embeddings",
}


def hf_config_fields(shape: ModelShapeConfig) -> dict:
    """`shape` as transformers' Qwen3Config keyword arguments: the model the estimate is of."""
    return {theirs: getattr(shape, ours) for ours, theirs in HF_KEYS.items()}


def shape_differences(shape: ModelShapeConfig, hf_config: dict) -> list[str]:
    """Fields where `shape` (hardware.model) differs from a model folder's config.json: the estimate would be
    of another model. A config.json without head_dim means hidden_size / num_attention_heads (HF's default)."""
    hf = dict(hf_config)
    if "head_dim" not in hf and "hidden_size" in hf and "num_attention_heads" in hf:
        hf["head_dim"] = hf["hidden_size"] // hf["num_attention_heads"]
    hf.setdefault("tie_word_embeddings", False)
    return [
        f"hardware.model.{ours} is {getattr(shape, ours)!r}, the model's {theirs} is {hf.get(theirs)!r}"
        for ours, theirs in HF_KEYS.items()
        if hf.get(theirs) != getattr(shape, ours)
    ]


def embedding_parameters(s: ModelShapeConfig) -> int:
    """Input embedding plus (untied) LM head."""
    return s.vocab_size * s.hidden_size * (1 if s.tie_word_embeddings else 2)


def layer_parameters(s: ModelShapeConfig) -> int:
    """One Qwen3 decoder layer: q/k/v/o projections (no bias), q/k RMSNorms, SwiGLU MLP, two RMSNorms."""
    q, kv = s.num_heads * s.head_dim, s.num_kv_heads * s.head_dim
    attention = s.hidden_size * q + 2 * s.hidden_size * kv + q * s.hidden_size + 2 * s.head_dim
    return attention + 3 * s.hidden_size * s.intermediate_size + 2 * s.hidden_size


def parameter_count(s: ModelShapeConfig) -> int:
    """All parameters of the causal LM (the final norm included)."""
    return embedding_parameters(s) + s.num_layers * layer_parameters(s) + s.hidden_size


def kv_bytes_per_token(s: ModelShapeConfig, dtype_bytes: int) -> int:
    """Keys and values of every layer for one token."""
    return 2 * s.num_layers * s.num_kv_heads * s.head_dim * dtype_bytes


def layer_activation_bytes(s: ModelShapeConfig, tokens: int, dtype_bytes: int) -> int:
    """Tensors one decoder layer saves for backward over `tokens` tokens (see the module docstring)."""
    q, kv = s.num_heads * s.head_dim, s.num_kv_heads * s.head_dim
    return tokens * dtype_bytes * (4 * s.hidden_size + 2 * q + 2 * kv + 4 * s.intermediate_size)


def math_attention_bytes(s: ModelShapeConfig, sequences: int, length: int) -> int:
    """PyTorch's math SDPA kernel in fp32: the [heads, S, S] scores and probabilities of one layer."""
    return 2 * sequences * s.num_heads * length * length * 4


def lm_head_bytes(s: ModelShapeConfig, response_tokens: int, chunk_tokens: int, compute_bytes: int) -> int:
    """The chunked LM head's backward: response hidden states and their gradient, one chunk's fp32 logits,
    softmax, one-hot and logit gradient, and the head's weight gradient."""
    chunk = min(chunk_tokens, response_tokens)
    hidden = 2 * response_tokens * s.hidden_size * compute_bytes
    return hidden + 4 * chunk * s.vocab_size * 4 + s.vocab_size * s.hidden_size * compute_bytes


@dataclass(frozen=True)
class RoleEstimate:
    """Bytes one role needs on one device, by part, against the memory its device share gives it."""

    role: str
    parts: dict[str, int]
    budget: int | None  # bytes of device memory this role may use; None = not checked
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def problems(self) -> list[str]:
        if self.budget is None or self.total <= self.budget:
            return []
        top = ", ".join(f"{k} {gib(v)}" for k, v in sorted(self.parts.items(), key=lambda kv: -kv[1])[:3])
        return [f"{self.role} needs {gib(self.total)} per device, more than its {gib(self.budget)} (largest: {top})"]


@dataclass(frozen=True)
class MemoryEstimate:
    """The whole recipe: one entry per role that holds model state on an accelerator, and the device count."""

    parameters: int
    roles: list[RoleEstimate]
    devices_needed: float
    devices: int | None
    device_memory: int | None
    extra_problems: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        found = [p for r in self.roles for p in r.problems()] + list(self.extra_problems)
        if self.devices is not None and self.devices_needed > self.devices:
            found.append(
                f"the roles ask for {self.devices_needed:g} devices (trainer, policy and verifier shares), "
                f"hardware.devices is {self.devices}"
            )
        return found

    def report(self) -> str:
        """A table a person reads in the dry run."""
        mem = gib(self.device_memory) if self.device_memory is not None else "not set"
        lines = [
            f"memory estimate: {self.parameters / 1e9:.3f} B parameters; device memory {mem}; "
            f"devices needed {self.devices_needed:g} of {self.devices if self.devices is not None else 'not set'}"
        ]
        for r in self.roles:
            budget = gib(r.budget) if r.budget is not None else "not checked"
            lines.append(f"  {r.role}: {gib(r.total)} of {budget}")
            lines += [f"    {k:<48} {gib(v):>12}" for k, v in r.parts.items()]
            lines += [f"    note: {n}" for n in r.notes]
        problems = self.problems()
        lines.append("  fits" if not problems else "  DOES NOT FIT: " + "; ".join(problems))
        return "\n".join(lines)


def gib(n: int | float) -> str:
    return f"{n / GIB:.2f} GiB"


def _budget(device: str, share: float, device_memory: int | None) -> int | None:
    """Device memory a role with `share` of one accelerator may use; None on CPU or when memory is unknown."""
    return None if device == "cpu" or device_memory is None else int(share * device_memory)


RESIDENT = ("parameters", "AdamW states")


def resident_parts(role: RoleEstimate) -> dict[str, int]:
    """The trainer parts that stay on the device between steps."""
    return {k: v for k, v in role.parts.items() if k in RESIDENT}


def _trainer(cfg: TrainConfig, s: ModelShapeConfig, device_memory: int | None) -> RoleEstimate:
    tc = cfg.trainer
    e, c = DTYPE_BYTES[tc.dtype], DTYPE_BYTES[tc.compute_dtype or tc.dtype]
    world, p = tc.num_workers, parameter_count(s)
    fsdp = world > 1 or tc.fsdp_policies
    tokens = tc.micro_batch_size * cfg.rollout.max_context_tokens
    response = tc.micro_batch_size * cfg.rollout.max_new_tokens
    one_layer = layer_activation_bytes(s, tokens, c)
    layer_inputs = s.num_layers * (tokens * s.hidden_size * c if tc.gradient_checkpointing else one_layer)
    notes = []
    attention = 0
    math_kernel = tc.device != "cpu" and c == 4 and s.num_kv_heads != s.num_heads
    if math_kernel:
        attention = math_attention_bytes(s, tc.micro_batch_size, cfg.rollout.max_context_tokens)
        notes.append(f"fp32 compute with grouped-query attention: PyTorch's math SDPA kernel, {gib(attention)} a layer")
    host = tc.offload_optimizer
    resident = {"parameters": 0 if host else p * e // world, "AdamW states": 0 if host else 2 * p * e // world}
    if host:
        notes.append(
            f"offloaded to the host: parameters and gradients {gib(2 * p * e // world)}, AdamW states "
            f"{gib(2 * p * e // world)}"
        )
    gathered = (embedding_parameters(s) + 2 * layer_parameters(s)) * c if fsdp else 0
    grads = 0 if host else p * e // world
    reduce_copy = 4 if world > 1 and tc.mixed_precision else 0  # one rank runs no reduce-scatter: no fp32 copy
    root_grads = embedding_parameters(s) * (c + reduce_copy)
    layer_grads = layer_parameters(s) * c
    moments = {
        "LM head backward": {
            "layer inputs": layer_inputs,
            "LM head": lm_head_bytes(s, response, tc.lm_head_chunk_tokens, c),
        },
        "a layer's backward": {
            "layer inputs": layer_inputs,
            "recomputed layer": (2 * one_layer if tc.gradient_checkpointing else one_layer) + attention,
            "residual gradient": tokens * s.hidden_size * c,
            "LM head gradient": s.vocab_size * s.hidden_size * c + layer_grads,
        },
        "end of backward": {"gradients": grads, "root gradients": root_grads},
        "optimizer step": {"gradients": grads, "AdamW temporaries": grads},
    }
    if gathered:  # resharded once backward is done
        for name in ("LM head backward", "a layer's backward", "end of backward"):
            moments[name]["gathered weights (FSDP2)"] = gathered
    sizes = {name: sum(parts.values()) for name, parts in moments.items()}
    largest = max(sizes, key=sizes.get)
    notes += [f"step moment {name}: {gib(size)}" for name, size in sizes.items() if name != largest]
    parts = {**resident, **{f"{largest}: {k}": v for k, v in moments[largest].items()}}
    budget = _budget(tc.device, tc.accelerators_per_worker, device_memory)
    dtype = tc.dtype if c == e else f"{tc.dtype} master, {tc.compute_dtype} compute"
    return RoleEstimate(f"trainer rank (x{world}, {dtype})", parts, budget, notes)


def _policy(cfg: TrainConfig, s: ModelShapeConfig, device_memory: int | None) -> tuple[RoleEstimate, list[str]]:
    pc = cfg.policy
    e = DTYPE_BYTES[pc.dtype]
    weights = parameter_count(s) * e
    per_token = kv_bytes_per_token(s, e)
    budget = _budget(pc.device, pc.accelerators_per_replica, device_memory)
    notes, problems = [], []
    if pc.engine == "transformers":
        kv = pc.max_batch_size * cfg.rollout.max_context_tokens * per_token
        parts = {"weights": weights, f"KV cache ({pc.max_batch_size} x {cfg.rollout.max_context_tokens} tokens)": kv}
        return RoleEstimate(f"policy replica (x{pc.num_replicas}, transformers)", parts, budget, notes), problems
    v = pc.vllm
    max_len = v.max_model_len or cfg.rollout.max_context_tokens
    one_seq = max_len * per_token
    if v.kv_cache_memory_gb is not None:
        kv = int(v.kv_cache_memory_gb * GIB)
    elif device_memory is not None:
        kv = max(0, int(v.gpu_memory_utilization * device_memory) - weights)
        if v.gpu_memory_utilization > pc.accelerators_per_replica:
            problems.append(
                f"policy.vllm.gpu_memory_utilization {v.gpu_memory_utilization} is more than the replica's device "
                f"share policy.accelerators_per_replica {pc.accelerators_per_replica}"
            )
    else:
        kv = one_seq
        notes.append("KV cache: hardware.device_memory_gib not set, counted as one max_model_len sequence")
    parts = {"weights": weights, "KV cache": kv}
    notes.append(
        f"KV cache holds {kv // one_seq} sequences of {max_len} tokens ({per_token} bytes/token); "
        f"vllm.max_num_seqs is {v.max_num_seqs}"
    )
    if kv < one_seq:
        problems.append(
            f"the policy's KV cache ({gib(kv)}) cannot hold one {max_len}-token sequence ({gib(one_seq)}): "
            "vLLM will refuse to start"
        )
    return RoleEstimate(f"policy replica (x{pc.num_replicas}, {pc.engine})", parts, budget, notes), problems


def _devices_needed(cfg: TrainConfig) -> float:
    """Sum of the accelerator shares every role asks for (CPU roles ask for none)."""
    total = 0.0
    if cfg.trainer.device != "cpu":
        total += cfg.trainer.num_workers * cfg.trainer.accelerators_per_worker
    if cfg.policy.device != "cpu":
        total += cfg.policy.num_replicas * cfg.policy.accelerators_per_replica
    if cfg.verifier.device != "cpu":
        total += cfg.verifier.autoscaling.max_replicas * cfg.verifier.accelerators_per_replica
    return total


def estimate_memory(cfg: TrainConfig) -> MemoryEstimate:
    """Per-device memory of the trainer ranks and policy replicas of `cfg`, checked against cfg.hardware."""
    s = model_shape(cfg)
    hw = cfg.hardware
    device_memory = int(hw.device_memory_gib * GIB) if hw.device_memory_gib is not None else None
    policy, problems = _policy(cfg, s, device_memory)
    return MemoryEstimate(
        parameters=parameter_count(s),
        roles=[_trainer(cfg, s, device_memory), policy],
        devices_needed=_devices_needed(cfg),
        devices=hw.devices,
        device_memory=device_memory,
        extra_problems=problems,
    )
