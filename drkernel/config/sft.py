"""Config of the embedded default (configs/demo_cpu.yaml): tiny model, tokenizer, SFT data and SFT.

The same SFT sections drive real models on GPU: point `sft.base_model` at a Hugging Face folder and
`data.sft_file` at a prompt/response parquet, and the tiny-model sections are simply not used.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from drkernel.config.base import StrictModel
from drkernel.config.verifier import DeviceName
from drkernel.types.task_category import Category


class TinyModelConfig(StrictModel):
    """Shape of the tiny Qwen3-architecture policy built from scratch."""

    hidden_size: int = Field(256, ge=16, description="width of the residual stream")
    num_layers: int = Field(4, ge=1, description="transformer blocks")
    num_heads: int = Field(4, ge=1, description="query heads")
    num_kv_heads: int = Field(2, ge=1, description="key/value heads (grouped-query attention)")
    head_dim: int = Field(64, ge=8, description="width of one attention head")
    intermediate_size: int = Field(768, ge=16, description="width of the SwiGLU MLP")
    max_position_embeddings: int = Field(4096, ge=128, description="longest sequence the model accepts")
    rope_theta: float = Field(10000.0, gt=0, description="RoPE base frequency")
    tie_word_embeddings: bool = Field(True, description="share input embedding and LM head")
    vocab_size: int | None = Field(
        None, ge=1, description="embedding rows; null = the tokenizer's size; more = a real model's shape (unused ids)"
    )
    seed: int = Field(0, description="seed of the random initialization")
    output_dir: str | None = Field(
        None, description="where the untrained model and tokenizer are saved; null = beside the SFT checkpoint"
    )

    @model_validator(mode="after")
    def _heads_divide(self) -> TinyModelConfig:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads {self.num_heads} is not a multiple of num_kv_heads {self.num_kv_heads}")
        return self


class TokenizerConfig(StrictModel):
    """The byte-level BPE trained on the shipped corpus."""

    vocab_size: int = Field(2048, ge=300, description="target vocabulary size, special tokens included")
    min_frequency: int = Field(2, ge=1, description="a pair must occur this often to be merged")


class DataConfig(StrictModel):
    """Where SFT examples come from."""

    tasks_dir: str | None = Field(None, description="task library folder; null = the shipped tasks")
    categories: list[Category] | None = Field(
        None, min_length=1, description="task categories SFT and the RL prompt pool use; null = all of them"
    )
    sft_file: str | None = Field(None, description="prompt/response parquet instead of the task library")
    prompt_style: str = Field("compact", description="first-turn prompt style of drkernel.data.prompts")
    max_length: int = Field(2048, ge=16, description="prompt+response tokens; longer examples are dropped")
    feedback_turns: bool = Field(
        False, description="also train second turns: a simple solution, the verifier's feedback on it, the fused one"
    )

    @model_validator(mode="after")
    def _task_options_need_tasks(self) -> DataConfig:
        if self.sft_file is not None and (self.categories is not None or self.feedback_turns):
            raise ValueError("categories and feedback_turns work on the task library; an sft_file has neither")
        return self


class SFTEvalConfig(StrictModel):
    """Sampling one answer per task after SFT and verifying it."""

    enabled: bool = Field(True, description="run the evaluation at the end of `drkernel sft`")
    temperature: float = Field(0.8, ge=0, description="sampling temperature of the sampled pass")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling threshold of the sampled pass")
    greedy: bool = Field(True, description="also evaluate one greedy answer per task")
    max_new_tokens: int = Field(1024, ge=1, description="generation budget per answer")
    batch_size: int = Field(8, ge=1, description="prompts generated together")
    seed: int = Field(0, description="seed of the sampled pass")
    max_concurrency: int = Field(2, ge=1, description="verifications run at once")
    verify_timeout_s: float = Field(120.0, gt=0, description="wall-clock limit of one verification")
    num_correct_trials: int = Field(2, ge=1, description="seeds of the correctness check")
    measure_performance: bool = Field(False, description="also time candidates (slow under the interpreter)")


class SFTConfig(StrictModel):
    """The cold-start SFT run: loss on response tokens only."""

    base_model: str | None = Field(None, description="HF model folder; null = build the tiny model first")
    output_dir: str | None = Field(
        None, description="checkpoint, metrics, summary; null = the machine-wide cache folder of these settings"
    )
    device: DeviceName = Field("auto", description="auto picks cuda, then npu, then cpu")
    dtype: Literal["float32", "bfloat16"] = Field("float32", description="parameter dtype while training")
    epochs: int = Field(25, ge=1, description="passes over the examples")
    max_steps: int | None = Field(None, ge=1, description="stop after this many optimizer steps")
    lr: float = Field(2e-3, gt=0, description="peak learning rate (AdamW)")
    min_lr_ratio: float = Field(0.1, ge=0, le=1, description="cosine decays to lr * this")
    warmup_steps: int = Field(10, ge=0, description="linear warmup steps")
    weight_decay: float = Field(0.0, ge=0, description="AdamW decoupled weight decay")
    betas: tuple[float, float] = Field((0.9, 0.95), description="AdamW betas")
    max_grad_norm: float = Field(1.0, gt=0, description="gradient clipping norm")
    micro_batch_size: int = Field(1, ge=1, description="sequences per forward pass")
    grad_accum_steps: int = Field(4, ge=1, description="micro-batches per optimizer step")
    gradient_checkpointing: bool = Field(False, description="recompute activations to save memory")
    num_threads: int | None = Field(2, ge=1, description="torch CPU threads; null leaves torch's default")
    seed: int = Field(0, description="seed of example order")
    log_every: int = Field(5, ge=1, description="log the loss every this many steps")
    eval: SFTEvalConfig = Field(default_factory=SFTEvalConfig, description="post-SFT sampling + verification")


class SFTRecipeConfig(StrictModel):
    """The recipe up to the SFT checkpoint (model, tokenizer, data, SFT), one section per stage; TrainConfig adds RL."""

    model: TinyModelConfig = Field(default_factory=TinyModelConfig, description="tiny policy shape")
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig, description="local tokenizer")
    data: DataConfig = Field(default_factory=DataConfig, description="SFT examples")
    sft: SFTConfig = Field(default_factory=SFTConfig, description="cold-start SFT")
