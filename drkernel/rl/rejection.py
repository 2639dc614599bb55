"""Everything that removes data from the loss, under one import.

Mismatch rejection and TIS live in `mrs`, profiling-based rejection in `prs`, the meaningful-turn
mask and the group-variance filter in `filters`; each module documents its formula. All of them
edit only loss masks (or drop whole groups): a rejected turn still serves in the TRLOO baseline.
"""

from drkernel.rl.filters import FilterStep, GroupVarianceFilter, last_turn_rewards, meaningful_turn_mask
from drkernel.rl.mrs import (
    MismatchRejection,
    mismatch_metrics,
    mismatch_rejection,
    rejection_fractions,
    rejection_keep_mask,
    truncated_is_weights,
    veto_turn_keep,
)
from drkernel.rl.prs import prs_generator, prs_keep_mask, prs_keep_probability

__all__ = [
    "FilterStep",
    "GroupVarianceFilter",
    "MismatchRejection",
    "last_turn_rewards",
    "meaningful_turn_mask",
    "mismatch_metrics",
    "mismatch_rejection",
    "prs_generator",
    "prs_keep_mask",
    "prs_keep_probability",
    "rejection_fractions",
    "rejection_keep_mask",
    "truncated_is_weights",
    "veto_turn_keep",
]
