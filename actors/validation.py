"""The training job's validation: its own policy and verifier deployments, called the way rollout workers call
them, on held-out tasks every `validation.every_steps` steps (drkernel.eval.validation does the measuring)."""

from __future__ import annotations

from typing import Any

from drkernel.config.train import TrainConfig
from drkernel.eval.tasks import load_tasks
from drkernel.eval.validation import validate
from drkernel.log import get_logger
from drkernel.types.sampling import GenerateOutput, SamplingParams
from drkernel.types.verify_result import VerifyResult
from serve_apps.verifier import verify_task

log = get_logger("train")


class Validator:
    """`await validator.run()` -> flat `val/` metrics of the policy's current weights."""

    def __init__(self, cfg: TrainConfig, policy: Any, verifier: Any, tokenizer: Any) -> None:
        vc = cfg.validation
        self.every = vc.every_steps
        self.cfg = cfg
        self.tasks = load_tasks(vc.prompt_file, vc.tasks, cfg.data.tasks_dir, cfg.rl_data.prompt_style)
        self._policy, self._verifier, self._tokenizer = policy, verifier, tokenizer
        log.info("validation every %d steps on %d held-out tasks", self.every, len(self.tasks))

    def due(self, step: int) -> bool:
        return step % self.every == 0

    async def _generate(self, prompt_ids: list[int], sampling: SamplingParams) -> GenerateOutput:
        return await self._policy.generate.remote(prompt_ids, sampling)

    async def _verify(self, reference: str, candidate: str, entry_point: str) -> VerifyResult:
        return await verify_task(self._verifier, reference, candidate, entry_point, self.cfg.verifier.options)

    async def run(self) -> dict[str, float]:
        c = self.cfg
        return await validate(
            self.tasks, self._generate, self._verify, self._tokenizer, c.rollout, c.algorithm.reward, c.validation
        )


def make_validator(cfg: TrainConfig, policy: Any, verifier: Any, tokenizer: Any) -> Validator | None:
    """A Validator when validation.every_steps > 0, else None."""
    return Validator(cfg, policy, verifier, tokenizer) if cfg.validation.every_steps else None
