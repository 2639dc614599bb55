"""PRS: profiling-based rejection sampling against lazy optimisation (DR.Kernel section 4.3).

A correct kernel that runs most of its time in torch ops (one trivial Triton kernel plus a torch
fallback) is honest but lazy. PRS drops such turns from the loss with probability depending on
c = Triton time coverage (device time in the candidate's Triton kernels / all kernel time):

    p_keep = clamp((c - theta) / f, 0, 1)    correct turns (recipe theta = 0.3, f = 0.1)
    p_keep = 1[c >= theta]                   correct turns when f is 0 or None (hard rule)
    p_keep = 1                               incorrect turns: reward 0 already, kept as negatives
    p_keep = max(p_keep, 1[speedup >= s*])   optional speed escape (off in the recipe)

Modes: `turn` draws one Bernoulli per turn; `geometric` (our reading of the reference) takes the
geometric mean of c over the trajectory's counted correct turns, draws once per trajectory and
applies the outcome to those correct turns. Rejection clears only the loss mask; the turn stays in
the TRLOO baseline. The sampler is an explicit torch.Generator so a run is reproducible.
"""

from __future__ import annotations

import torch

from drkernel.config.algorithm import PRSConfig


def prs_keep_probability(
    coverage: torch.Tensor,
    correct: torch.Tensor,
    threshold: float = 0.3,
    factor: float | None = 0.1,
    speedup: torch.Tensor | None = None,
    speedup_threshold: float | None = None,
) -> torch.Tensor:
    """p_keep per element (formula in the module docstring); NaN coverage counts as 0."""
    if coverage.shape != correct.shape:
        raise ValueError(f"coverage shape {tuple(coverage.shape)} != correct shape {tuple(correct.shape)}")
    # computed in the coverage's own precision so that c == theta (e.g. float32 0.3) gives exactly 0
    c = torch.nan_to_num(coverage if coverage.is_floating_point() else coverage.float(), nan=0.0)
    if factor:
        p = ((c - threshold) / factor).clamp(0.0, 1.0)
    else:
        p = (c >= threshold).to(c.dtype)
    if speedup_threshold is not None:
        if speedup is None or speedup.shape != coverage.shape:
            raise ValueError("speedup_threshold needs a speedup tensor shaped like coverage")
        p = torch.maximum(p, (torch.nan_to_num(speedup, nan=0.0) >= speedup_threshold).to(c.dtype))
    return torch.where(correct.bool(), p, torch.ones_like(p))


def _geometric_coverage(coverage: torch.Tensor, selected: torch.Tensor) -> torch.Tensor:
    """[N]: exp(mean log c) over selected turns; 1 where a trajectory has none (nothing to reject)."""
    c = torch.nan_to_num(coverage, nan=0.0).clamp(0.0, 1.0)
    log_c = torch.where(selected, torch.log(c), torch.zeros_like(c))
    count = selected.sum(dim=-1)
    geo = torch.exp(log_c.sum(dim=-1) / count.clamp(min=1))
    return torch.where(count > 0, geo, torch.ones_like(geo))


def prs_keep_mask(
    coverage: torch.Tensor,
    correct: torch.Tensor,
    turn_mask: torch.Tensor,
    cfg: PRSConfig,
    generator: torch.Generator,
    speedup: torch.Tensor | None = None,
) -> torch.Tensor:
    """[N, T] bool: False for counted turns that PRS rejects; all True when PRS is disabled."""
    if coverage.dim() != 2 or turn_mask.shape != coverage.shape:
        shapes = f"{tuple(coverage.shape)}, {tuple(turn_mask.shape)}"
        raise ValueError(f"coverage and turn_mask must both be [N, T]: {shapes}")
    if not cfg.enabled:
        return torch.ones_like(turn_mask, dtype=torch.bool)
    correct = correct.bool() & turn_mask.bool()
    if cfg.mode == "turn":
        p = prs_keep_probability(coverage, correct, cfg.threshold, cfg.factor, speedup, cfg.speedup_threshold)
        u = torch.rand(coverage.shape, generator=generator, dtype=torch.float64)
    else:
        geo = _geometric_coverage(coverage, correct)[:, None].expand_as(coverage)
        p = prs_keep_probability(geo, correct, cfg.threshold, cfg.factor, speedup, cfg.speedup_threshold)
        u = torch.rand((coverage.shape[0], 1), generator=generator, dtype=torch.float64).expand_as(coverage)
    return (u < p.cpu().to(torch.float64)).to(turn_mask.device) | ~turn_mask.bool()


def prs_generator(seed: int) -> torch.Generator:
    """The seeded CPU generator PRS draws from."""
    return torch.Generator().manual_seed(seed)
