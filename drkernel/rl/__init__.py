"""The DR.Kernel RL mathematics: rewards, advantages, rejection, filtering, loss; torch tensors in and out, with
verl's `core_algos` doing the policy loss, the KL penalties and the mismatch-rejection masks.

Glossary (the acronyms are the paper's, kept so each formula can be checked against it):
- TRLOO: turn-level REINFORCE leave-one-out, the recipe's advantage estimator (`trloo`); `grpo_mean` and
  `rloo_last_turn` are the ablation baselines in the same module and under the same config section.
- MRS: mismatch rejection sampling, dropping tokens, turns or trajectories whose trainer / rollout-engine
  log-prob ratio leaves [lower, upper] (`mrs`); TIS, truncated importance sampling, lives beside it.
- PRS: profiling-based rejection sampling, dropping correct turns whose Triton time coverage is low (`prs`).
- Meaningful-turn mask and group-variance filter: which turns count, which prompt groups carry a signal
  (`filters`).
- Staleness: how far rollouts may run ahead of the trainer's weights (`staleness`).
"""
