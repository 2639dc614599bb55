"""The policy update on the tiny model: learning direction, zero gradient where masked, and agreement with
the composed recipe maths (tests/rl/test_pipeline.py) computed from full logits."""

from __future__ import annotations

import pytest
import torch
from trajectory_factory import TurnSpec, make_trajectory

from drkernel.config.algorithm import AlgorithmConfig
from drkernel.config.sft import TinyModelConfig
from drkernel.model.tiny import build_tiny_model
from drkernel.model.tokenizer import build_tokenizer
from drkernel.rl.filters import GroupVarianceFilter
from drkernel.rl.loss import policy_loss
from drkernel.rl.mrs import mismatch_rejection
from drkernel.rl.prs import prs_generator
from drkernel.rl.step_batch import StepBatch, build_step_batch
from drkernel.rl.update import ResponseScorer, accumulate_gradients, recompute_log_probs, train_step

SMALL = TinyModelConfig(hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=32, intermediate_size=128)
OK = dict(correct=True, reward=1.5, speedup=0.5, coverage=0.9)
LAZY = dict(correct=True, reward=1.0, speedup=0.5, coverage=0.0)  # PRS always rejects coverage 0


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(["def relu(x): return x * (x > 0)", "import triton"] * 4, vocab_size=300)


def _model(tokenizer):
    torch.manual_seed(0)
    return build_tiny_model(SMALL, tokenizer)


def _batch(trajs, cfg: AlgorithmConfig, pad_id: int) -> StepBatch:
    groups = len({t.group_id for t in trajs})
    filt = GroupVarianceFilter(cfg.filter, target_groups=groups, group_size=3)
    return build_step_batch(trajs, cfg, pad_id, filt, prs_generator(cfg.prs.seed))


def _on_policy(batch: StepBatch, model, temperature: float = 1.0) -> None:
    """Give the batch the engine log-probs an exact engine would have produced (MRS then keeps it)."""
    with torch.no_grad():
        logp, _ = ResponseScorer(model)(batch.input_ids, batch.attention_mask, batch.token_turn >= 0, temperature)
    batch.rollout_log_probs = torch.where(batch.token_turn >= 0, logp, torch.zeros_like(logp))


def _mixed_batch(tokenizer, model, cfg):
    trajs = [
        make_trajectory("a", 0, [TurnSpec(tokens=4), TurnSpec(tokens=3, **OK)]),
        make_trajectory("a", 1, [TurnSpec(tokens=3, masked=True), TurnSpec(tokens=2)]),
        make_trajectory("a", 2, [TurnSpec(tokens=5, **LAZY)]),
        make_trajectory("b", 0, [TurnSpec(tokens=2, **OK)]),
        make_trajectory("b", 1, [TurnSpec(tokens=3)]),
        make_trajectory("b", 2, [TurnSpec(tokens=4), TurnSpec(tokens=2)]),
    ]
    batch = _batch(trajs, cfg, tokenizer.pad_token_id)
    _on_policy(batch, model, 0.7)
    batch.rollout_log_probs[4] += torch.where(batch.token_turn[4] >= 0, 0.05, 0.0)  # drifted: MRS rejects row 4
    return batch


class Capturing(ResponseScorer):
    """Keeps every grad-pass output so the test can read d loss / d log-prob per position."""

    def __init__(self, policy):
        super().__init__(policy)
        self.captured: list[torch.Tensor] = []

    def forward(self, *args, **kwargs):
        logp, entropy = super().forward(*args, **kwargs)
        if torch.is_grad_enabled():
            logp.retain_grad()
            self.captured.append(logp)
        return logp, entropy


def test_masked_and_rejected_tokens_get_zero_gradient(tokenizer):
    cfg = AlgorithmConfig()
    model = _model(tokenizer)
    batch = _mixed_batch(tokenizer, model, cfg)
    scorer = Capturing(model)
    metrics = accumulate_gradients(scorer, batch, cfg, micro_batch_size=1, temperature=0.7)
    grads = [out.grad[0] for out in scorer.captured]
    assert len(grads) == batch.num_rows
    prs_rejected = ~batch.prs_keep.gather(1, batch.token_turn.clamp(min=0)) & (batch.token_turn >= 0)
    for row, grad in enumerate(grads):
        live = batch.response_mask[row, : grad.shape[0]] & ~prs_rejected[row, : grad.shape[0]]
        if row == 4:
            live[:] = False  # MRS
        assert torch.equal(grad[~live], torch.zeros_like(grad[~live])), row
        if live.any() and (batch.advantages[row, : grad.shape[0]][live] != 0).any():
            assert grad[live].abs().sum() > 0, row
    assert metrics["mrs/trajectory_rejected_fraction"] > 0 and 0 < metrics["train/rejected_token_fraction"] < 1
    assert "mismatch/training_ppl" in metrics or any(k.startswith("mismatch/") for k in metrics)
    assert batch.prs_keep[2, 0].item() is False  # the lazy kernel was really rejected


def test_gradient_agrees_with_the_composed_recipe_on_full_logits(tokenizer):
    """Micro-batched, response-only scoring gives the gradient of the test_pipeline composition."""
    cfg = AlgorithmConfig()
    model = _model(tokenizer)
    batch = _mixed_batch(tokenizer, model, cfg)
    accumulate_gradients(model, batch, cfg, micro_batch_size=2, temperature=0.7)
    ours = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)

    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1] / 0.7
    seq_logp = torch.log_softmax(logits.float(), -1).gather(-1, batch.input_ids[:, 1:, None])[..., 0]
    seq_logp = torch.cat([torch.zeros_like(seq_logp[:, :1]), seq_logp], dim=1)
    logp = batch.to_turns(seq_logp)
    tok_mask = batch.to_turns(batch.response_mask)
    rollout = batch.to_turns(batch.rollout_log_probs)
    mrs = mismatch_rejection(logp.detach(), rollout, tok_mask, cfg.mrs)
    loss_mask = mrs.response_mask & batch.prs_keep[..., None]
    loss, _ = policy_loss(logp, logp.detach(), batch.to_turns(batch.advantages), loss_mask, cfg.loss)
    loss.backward()
    for name, param in model.named_parameters():
        torch.testing.assert_close(ours[name], param.grad, rtol=1e-4, atol=1e-7, msg=name)
    assert any(g.abs().sum() > 0 for g in ours.values())


def test_positive_advantage_response_becomes_more_likely(tokenizer):
    cfg = AlgorithmConfig.model_validate({"mrs": {"mode": None, "veto_threshold": None}, "prs": {"enabled": False}})
    model = _model(tokenizer)
    trajs = [make_trajectory("a", i, [TurnSpec(tokens=4, **(OK if i == 0 else {}))]) for i in range(3)]
    batch = _batch(trajs, cfg, tokenizer.pad_token_id)
    _on_policy(batch, model)
    assert batch.turn_advantages[0, 0] > 0 > batch.turn_advantages[1, 0]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    old = recompute_log_probs(ResponseScorer(model), batch, 3, 1.0)
    mask = batch.to_turns(batch.response_mask)
    adv = batch.to_turns(batch.advantages)

    def surrogate() -> float:
        new = recompute_log_probs(ResponseScorer(model), batch, 3, 1.0)
        return float((-(adv * torch.exp(new - old))[mask]).sum())

    first = surrogate()
    history = []
    for _ in range(5):
        m = train_step(model, optimizer, batch, cfg, micro_batch_size=2, max_grad_norm=1.0, lr=1e-2)
        assert m["train/stepped"] == 1.0 and m["train/grad_norm"] > 0 and m["train/lr"] == 1e-2
        history.append(surrogate())
    new = recompute_log_probs(ResponseScorer(model), batch, 3, 1.0)
    assert new[0][mask[0]].sum() > old[0][mask[0]].sum()  # the rewarded response
    assert new[1][mask[1]].sum() < old[1][mask[1]].sum()  # a failed one
    assert history[-1] < first and history == sorted(history, reverse=True)


def test_no_step_without_data(tokenizer):
    cfg = AlgorithmConfig()
    model = _model(tokenizer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trajs = [make_trajectory("a", i, [TurnSpec(tokens=3, **(OK if i == 0 else {}))]) for i in range(3)]
    drifted = _batch(trajs, cfg, tokenizer.pad_token_id)  # rollout log-probs -1.0: MRS rejects everything
    m = train_step(model, optimizer, drifted, cfg, micro_batch_size=2, max_grad_norm=1.0)
    assert m["train/stepped"] == 0.0 and m["train/loss_tokens"] == 0.0
    flat = [make_trajectory("b", i, [TurnSpec(tokens=3)]) for i in range(3)]
    filt = GroupVarianceFilter(cfg.filter, target_groups=1, group_size=3)
    skipped = build_step_batch(flat, cfg, tokenizer.pad_token_id, filt, prs_generator(0))
    assert (
        skipped.skipped
        and train_step(model, optimizer, skipped, cfg, micro_batch_size=2, max_grad_norm=1.0)["train/stepped"] == 0.0
    )
    assert all(torch.equal(before[n], p) for n, p in model.named_parameters())


def test_the_update_effect_reports_which_way_the_step_moved_each_side(tokenizer):
    """The job's own direction check (issue 24): after a step the rewarded turn's log-prob rose and the failed ones'
    fell, by the trainer's forward pass; a step that changes nothing reports zero on both sides."""
    cfg = AlgorithmConfig.model_validate({"mrs": {"mode": None, "veto_threshold": None}, "prs": {"enabled": False}})
    model = _model(tokenizer)
    trajs = [make_trajectory("a", i, [TurnSpec(tokens=4, **(OK if i == 0 else {}))]) for i in range(3)]
    batch = _batch(trajs, cfg, tokenizer.pad_token_id)
    _on_policy(batch, model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    m = train_step(model, optimizer, batch, cfg, micro_batch_size=2, max_grad_norm=1.0, measure_effect=True)
    assert m["train/update_logp_pos"] > 0 > m["train/update_logp_neg"]
    frozen = train_step(
        model, optimizer, batch, cfg, micro_batch_size=2, max_grad_norm=1.0, lr=0.0, measure_effect=True
    )
    assert frozen["train/stepped"] == 1.0
    assert frozen["train/update_logp_pos"] == 0.0 == frozen["train/update_logp_neg"]
    assert "train/update_logp_pos" not in train_step(
        model, optimizer, batch, cfg, micro_batch_size=2, max_grad_norm=1.0
    )
