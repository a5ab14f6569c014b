"""Always-valid statistics for a canary that is looked at after every batch. Pure functions.

**The bound.** An estimate ``d`` of an effect ``θ`` with standard error ``se`` carries the
information ``I = 1/se²``; ``S = (d − θ₀)·I`` then moves like a Brownian motion with drift
``θ − θ₀`` in information time. Against the null ``θ ≤ θ₀``, mixing the likelihood ratio over
alternatives ``θ₀ + δ``, ``δ ~ N(0, τ²)`` restricted to ``δ > 0`` (a half-normal), gives the
one-sided normal-mixture martingale (Robbins 1970; the mSPRT of Johari et al. 2017, one-sided)

    M(S, I) = 2 (1 + τ²I)^(−1/2) · exp(τ²S² / (2(1 + τ²I))) · Φ(τS / sqrt(1 + τ²I)),

a non-negative supermartingale under the null. By Ville's inequality it ever reaches ``1/α``
with probability at most ``α``, however often it is looked at and whenever the looking stops.
So ``d − r(I)``, where ``r`` solves ``M(r·I, I) = 1/α``, is a lower confidence sequence: it
stays below ``θ`` at every look at once with probability ``1 − α``; ``d + r(I)`` is the upper
one. ``τ`` is the effect size the bound is tuned for: it is tightest where ``r ≈ τ``, so
``τ = margin`` makes it tightest where a non-inferiority decision at the margin is taken. With
an estimated ``se`` the sequence is asymptotically valid (Waudby-Smith et al. 2021, "time-uniform
central limit theory"); ``bench/release_rule.py`` measures its error rates at the sizes used.

**The sample ratio.** Counts of the canary against the rest, with an intended canary share
``s``: the Bayes factor of a Beta(c·s, c·(1 − s)) mixture over the true share against ``s``
(Lindon & Malek 2022) is a martingale under a correct split, so a mismatch is flagged
when it reaches ``1/α_srm``: again valid at every look.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["mixture_log_value", "information_needed", "radius", "srm_log_bayes_factor"]

_LOG2 = math.log(2.0)


def _log_normal_cdf(z: float) -> float:
    if z > -30:
        return math.log(0.5 * math.erfc(-z / math.sqrt(2.0)))
    return -z * z / 2 - math.log(-z * math.sqrt(2 * math.pi))  # the tail, where erfc underflows


def mixture_log_value(excess: float, information: float, tau: float) -> float:
    """``log M(S, I)`` of the module docstring, for ``S = excess`` and ``I = information``."""
    spread = 1.0 + tau * tau * information
    return (_LOG2 - 0.5 * math.log(spread) + tau * tau * excess * excess / (2 * spread)
            + _log_normal_cdf(tau * excess / math.sqrt(spread)))


def radius(information: float, alpha: float, tau: float) -> float:
    """``r(I)``: the one-sided always-valid bound of an estimate is ``estimate ∓ r``; ``inf``
    without information."""
    if not information > 0 or math.isinf(information):
        return math.inf if not information > 0 else 0.0
    target = math.log(1.0 / alpha)
    low, high = 0.0, 1.0 / math.sqrt(information)
    while mixture_log_value(high * information, information, tau) < target:
        low, high = high, 2 * high
    for _ in range(64):  # bisection to the float's precision
        middle = (low + high) / 2
        if mixture_log_value(middle * information, information, tau) >= target:
            high = middle
        else:
            low = middle
    return high


def information_needed(gap: float, alpha: float, tau: float,
                       most: float = 1e12) -> float | None:
    """The least information at which ``r(I) < gap`` (the bound clears a boundary ``gap`` away
    from the estimate); None when ``gap ≤ 0`` or more than ``most`` would be needed."""
    if not gap > 0:
        return None
    return _least(lambda information: radius(information, alpha, tau) < gap, most)


def _least(holds: Callable[[float], bool], most: float) -> float | None:
    """The least ``x`` in (0, most] where the monotone ``holds`` turns true (to 0.1%)."""
    high = 1.0
    while not holds(high):
        high *= 2
        if high > most:
            return None
    low = high / 2
    while high - low > 1e-3 * high:
        middle = (low + high) / 2
        low, high = (low, middle) if holds(middle) else (middle, high)
    return high


def srm_log_bayes_factor(n_canary: int, n_rest: int, share: float,
                         concentration: float) -> float:
    """log Bayes factor of the counts against a canary share of ``share`` (see above)."""
    a, b = concentration * share, concentration * (1 - share)
    marginal = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + math.lgamma(a + n_canary)
                + math.lgamma(b + n_rest) - math.lgamma(a + b + n_canary + n_rest))
    return marginal - n_canary * math.log(share) - n_rest * math.log(1 - share)
