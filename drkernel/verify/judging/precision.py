"""When timing may stop: the timed rounds are paired (reference and candidate alternate inside one round), so the
precision of a speedup is the precision of the median of the per-round ratios candidate/reference. Its 95 %
distribution-free interval comes from order statistics: with n ratios sorted, the ranks
    l = floor((n - 1.96 sqrt(n)) / 2),   u = ceil(1 + (n + 1.96 sqrt(n)) / 2)      (1-based, clamped to 1..n)
bound the median with about 95 % confidence whatever the distribution (the normal approximation of the
Binomial(n, 1/2) count of ratios below the median)."""

from __future__ import annotations

import math
import statistics

Z95 = 1.96
RELAXED = 3  # after the budget: 3 x 1 % by default, the self-speedup tolerance (1.00 +- 0.03) the benchmark holds


def median_interval(values: list[float]) -> tuple[float, float]:
    """The 95 % order-statistic interval of the median of `values` (at least one value)."""
    xs = sorted(values)
    n = len(xs)
    half = Z95 * math.sqrt(n)
    lo = max(1, math.floor((n - half) / 2))
    hi = min(n, math.ceil(1 + (n + half) / 2))
    return xs[lo - 1], xs[hi - 1]


def relative_half_width(values: list[float]) -> float:
    """The larger distance from the median to an end of its 95 % interval, as a share of the median."""
    med = statistics.median(values)
    if med <= 0:
        return math.inf
    lo, hi = median_interval(values)
    return max(med - lo, hi - med) / med


def enough_rounds(
    ratios: list[float], precision: float, min_rounds: int, max_rounds: int, spent_s: float = 0.0, budget_s: float = 0.0
) -> bool:
    """Stop timing: every round asked for is done, or at least `min_rounds` are and the median ratio is known
    within `precision`, or within RELAXED x `precision` once the rounds have taken `budget_s` (Triton do_bench's
    idea: calls of tens of milliseconds settle for fewer rounds when their rounds agree). A precision of 0 times
    every round; a budget of 0 never relaxes it."""
    n = len(ratios)
    if n >= max_rounds:
        return True
    if precision <= 0 or n < min(min_rounds, max_rounds):
        return False
    if budget_s > 0 and spent_s >= budget_s:
        precision *= RELAXED
    return relative_half_width(ratios) <= precision
