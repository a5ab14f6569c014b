"""Small exact statistics the detectors and the A/B report use. Pure functions, no I/O.

Every detector is a one-sided CUSUM (Page 1954) on log-likelihood ratios: with increments
``log f1(x)/f0(x)`` and alarm threshold ``h``, the expected number of observations (here: metric
windows) before a false alarm is at least ``e**h`` when the data follow ``f0`` (Lorden 1971).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from statistics import NormalDist

__all__ = [
    "bernoulli_llr",
    "chi_square_sf",
    "PairMoments",
    "adjusted_difference",
    "adjusted_difference_of",
    "cusum_step",
    "difference",
    "gaussian_llr",
    "poisson_llr",
    "relative_change",
    "wilson_interval",
    "z_for_confidence",
]

_EPS = 1e-6


def z_for_confidence(confidence: float) -> float:
    """The two-sided normal quantile: 0.95 → 1.959964."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(successes: float, n: float, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a proportion; (0, 1) when there are no trials."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _clamp_p(p: float) -> float:
    return min(1 - _EPS, max(_EPS, p))


def bernoulli_llr(successes: float, n: float, p0: float, p1: float) -> float:
    """log-likelihood ratio of ``n`` Bernoulli trials with ``successes`` under p1 vs p0."""
    p0, p1 = _clamp_p(p0), _clamp_p(p1)
    return successes * math.log(p1 / p0) + (n - successes) * math.log((1 - p1) / (1 - p0))


def gaussian_llr(n: float, mean: float, mu0: float, sigma: float, delta: float) -> float:
    """LLR of ``n`` normal observations with sample ``mean``: N(mu0+delta, σ²) vs N(mu0, σ²)."""
    if n <= 0 or sigma <= 0:
        return 0.0
    return n * delta / (sigma * sigma) * (mean - mu0 - delta / 2)


def poisson_llr(count: float, lam0: float, lam1: float) -> float:
    """LLR of one Poisson count under rate lam1 vs lam0 (both per window, > 0)."""
    lam0, lam1 = max(lam0, _EPS), max(lam1, _EPS)
    return count * math.log(lam1 / lam0) - (lam1 - lam0)


def cusum_step(statistic: float, llr: float, cap: float) -> float:
    """One CUSUM update, ``max(0, S + llr)``, capped so recovery is noticed in bounded time."""
    return min(cap, max(0.0, statistic + llr))


def relative_change(
    mean0: float, var0: float, n0: float, mean1: float, var1: float, n1: float, z: float,
) -> tuple[float, float, float]:
    """Relative change ``mean1/mean0 − 1`` and its delta-method interval ``(rel, lo, hi)``.

    se = sqrt(var1/n1 + (mean1/mean0)² · var0/n0) / |mean0|, the first-order variance of the
    ratio of two independent sample means. The interval is symmetric; where both means are of a
    quantity that is never negative (a rate, a latency) its lower end is cut at −100%, as no such
    quantity can fall further.
    """
    if n0 <= 0 or n1 <= 0 or mean0 == 0:
        return math.nan, math.nan, math.nan
    ratio = mean1 / mean0
    se = math.sqrt(var1 / n1 + ratio * ratio * var0 / n0) / abs(mean0)
    rel = ratio - 1
    low = rel - z * se
    if mean0 > 0 and mean1 >= 0:  # a rate, a count, a latency: it cannot fall more than 100%
        low = max(low, -1.0)
    return rel, low, rel + z * se


def difference(
    mean0: float, var0: float, n0: float, mean1: float, var1: float, n1: float, z: float,
) -> tuple[float, float, float]:
    """Difference ``mean1 − mean0`` of two independent sample means and its normal interval
    ``(diff, lo, hi)``, se = sqrt(var0/n0 + var1/n1) (Welch's, without the t correction)."""
    if n0 <= 0 or n1 <= 0:
        return math.nan, math.nan, math.nan
    diff = mean1 - mean0
    se = math.sqrt(var0 / n0 + var1 / n1)
    return diff, diff - z * se, diff + z * se


@dataclass
class PairMoments:
    """Additive sums of one group's ``(y, x)`` pairs, ``x`` a covariate that may be missing:
    what :func:`adjusted_difference_of` needs, so a group can be folded one pair at a time."""

    n: int = 0
    sum_y: float = 0.0
    sum_yy: float = 0.0
    covered: int = 0  # pairs with an x
    sum_x: float = 0.0
    sum_xx: float = 0.0
    sum_xy: float = 0.0
    sum_y_covered: float = 0.0

    def add(self, y: float, x: float | None) -> None:
        self.n += 1
        self.sum_y += y
        self.sum_yy += y * y
        if x is not None:
            self.covered += 1
            self.sum_x += x
            self.sum_xx += x * x
            self.sum_xy += x * y
            self.sum_y_covered += y

    def __add__(self, other: PairMoments) -> PairMoments:
        return PairMoments(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


def _sample_variance(n: float, total: float, squares: float) -> float:
    return max(0.0, (squares - total * total / n) / (n - 1))


def adjusted_difference_of(
    baseline: PairMoments, candidate: PairMoments, z: float,
) -> tuple[float, float, float, float, float]:
    """:func:`adjusted_difference` from the groups' sums; returns ``(diff, lo, hi, variance
    reduction, standard error)``."""
    if baseline.n < 2 or candidate.n < 2:
        return math.nan, math.nan, math.nan, 0.0, math.nan
    pooled = baseline + candidate
    theta, x_mean = 0.0, 0.0
    if pooled.covered >= 2:
        x_mean = pooled.sum_x / pooled.covered
        spread = pooled.sum_xx - pooled.sum_x * x_mean
        if spread > 1e-12 * max(1.0, pooled.sum_xx):
            theta = (pooled.sum_xy - x_mean * pooled.sum_y_covered) / spread

    def adjusted(group: PairMoments) -> tuple[float, float]:
        """Mean and variance of the group's ``y − θ(x − x̄)`` (``y`` where x is missing)."""
        total = group.sum_y - theta * (group.sum_x - group.covered * x_mean)
        centred_xy = group.sum_xy - x_mean * group.sum_y_covered
        centred_xx = group.sum_xx - 2 * x_mean * group.sum_x + group.covered * x_mean ** 2
        squares = group.sum_yy - 2 * theta * centred_xy + theta * theta * centred_xx
        return total / group.n, _sample_variance(group.n, total, squares)

    (m0, v0), (m1, v1) = adjusted(baseline), adjusted(candidate)
    diff, lo, hi = difference(m0, v0, baseline.n, m1, v1, candidate.n, z)
    raw = sum(_sample_variance(g.n, g.sum_y, g.sum_yy) / g.n for g in (baseline, candidate))
    kept = v0 / baseline.n + v1 / candidate.n
    return diff, lo, hi, 1 - kept / raw if raw > 0 else 0.0, math.sqrt(kept)


def adjusted_difference(
    baseline: Sequence[tuple[float, float | None]], candidate: Sequence[tuple[float, float | None]],
    z: float,
) -> tuple[float, float, float, float]:
    """The difference of means of ``y`` (candidate − baseline), adjusted for a covariate ``x``
    measured before the assignment (CUPED, Deng et al. 2013): each ``y`` becomes
    ``y − θ(x − x̄)`` with ``θ = cov(x, y) / var(x)`` pooled over both groups, which keeps the
    difference unbiased and shrinks its variance by the share ``ρ²`` the covariate explains.
    Pairs ``(y, x)``; an ``x`` of None (no covariate) counts as ``x̄``, that is, unadjusted.
    Returns ``(diff, lo, hi, variance reduction)``; Welch's normal interval on adjusted values.
    """
    groups = []
    for pairs in (baseline, candidate):
        moments = PairMoments()
        for y, x in pairs:
            moments.add(y, x)
        groups.append(moments)
    return adjusted_difference_of(groups[0], groups[1], z)[:4]


def chi_square_sf(statistic: float, df: int) -> float:
    """P(X ≥ statistic) for X ~ χ²(df), by the closed forms for integer degrees of freedom."""
    if df < 1:
        raise ValueError(f"df must be ≥ 1, got {df}")
    if statistic <= 0:
        return 1.0
    half = statistic / 2
    if df % 2 == 0:
        term, total = 1.0, 1.0
        for i in range(1, df // 2):
            term *= half / i
            total += term
        return math.exp(-half) * total
    root = math.sqrt(half)
    total = math.erfc(root)
    term = root / math.sqrt(math.pi) * 2 * math.exp(-half)  # 2·sqrt(x/2π)·e^(−x/2)
    for i in range(1, (df + 1) // 2):
        total += term
        term *= half / (i + 0.5)
    return total
