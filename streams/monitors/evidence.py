"""The evidence an alert carries: baseline vs now, sample sizes, intervals, the CUSUM state."""

from __future__ import annotations

import math
from typing import Any

from schemas.metrics import MetricStat
from streams.monitors.config import TestSpec
from streams.monitors.stats import relative_change, wilson_interval, z_for_confidence

__all__ = ["describe_test", "shows_change", "summary_line"]


def _rounded(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)


def _side(test: TestSpec, stat: MetricStat, windows: int, z: float) -> dict[str, Any]:
    """Value, weight and interval of one side (baseline or now)."""
    if test.family == "poisson":
        mean = stat.sum / windows if windows else math.nan
        half = z * math.sqrt(mean / windows) if windows else math.nan
        return {"value": _rounded(mean), "n": windows, "unit": "events per window",
                "interval": [_rounded(mean - half), _rounded(mean + half)]}
    if test.family == "bernoulli":
        lo, hi = wilson_interval(stat.sum, stat.n, z)
        return {"value": _rounded(stat.mean), "n": stat.n, "interval": [_rounded(lo), _rounded(hi)]}
    half = z * math.sqrt(stat.variance / stat.n) if stat.n >= 2 else math.nan
    side = {"value": _rounded(stat.mean), "n": stat.n,
            "interval": [_rounded(stat.mean - half), _rounded(stat.mean + half)]}
    if test.metric.startswith("log_"):  # report the geometric mean on the natural scale
        side["geometric_mean"] = _rounded(math.exp(stat.mean)) if stat.n else None
    return side


def _variance(test: TestSpec, stat: MetricStat, windows: int) -> tuple[float, float, float]:
    """(mean, per-unit variance, units) for the relative-change interval."""
    if test.family == "poisson":
        mean = stat.sum / windows if windows else math.nan
        return mean, mean, float(windows)
    if test.family == "bernoulli":
        return stat.mean, stat.mean * (1 - stat.mean), stat.n
    return stat.mean, stat.variance, stat.n


def _change(test: TestSpec, base: MetricStat, now: MetricStat, windows: tuple[int, int],
            z: float) -> dict[str, Any]:
    m0, v0, n0 = _variance(test, base, windows[0])
    m1, v1, n1 = _variance(test, now, windows[1])
    if test.metric.startswith("log_"):  # a difference of logs is a ratio of geometric means
        if n0 < 2 or n1 < 2:
            return {"value": None, "interval": [None, None]}
        diff, se = m1 - m0, math.sqrt(v0 / n0 + v1 / n1)
        rel, lo, hi = math.expm1(diff), math.expm1(diff - z * se), math.expm1(diff + z * se)
    elif any(math.isnan(x) for x in (m0, v0, m1, v1)):
        rel = lo = hi = math.nan
    else:
        rel, lo, hi = relative_change(m0, v0, n0, m1, v1, n1, z)
    return {"value": _rounded(rel), "interval": [_rounded(lo), _rounded(hi)]}


def describe_test(
    test: TestSpec, now: MetricStat, base: MetricStat, windows: tuple[int, int],
    statistic: float, null: float, alternative: float, confidence: float,
) -> dict[str, Any]:
    """One test's evidence; ``windows`` = (baseline windows, windows since the CUSUM left 0)."""
    z = z_for_confidence(confidence)
    return {
        "metric": test.metric, "family": test.family, "direction": test.direction,
        "confidence": confidence,
        "baseline": _side(test, base, windows[0], z), "now": _side(test, now, windows[1], z),
        "relative_change": _change(test, base, now, windows, z),
        "cusum": round(statistic, 3), "null": _rounded(null), "alternative": _rounded(alternative),
    }


def shows_change(test: dict[str, Any], at_least: float = 0.0) -> bool:
    """Whether a test's interval of the relative change excludes every change smaller than
    ``at_least`` (0: no change), on the side the test watches (above for ``up``, below for
    ``down``); False when there is no interval."""
    low, high = test["relative_change"]["interval"]
    if low is None or high is None:
        return False
    return bool(low > at_least) if test["direction"] == "up" else bool(high < -at_least)


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g}"


def summary_line(tests: list[dict[str, Any]]) -> str:
    """``edit_rate 0.31 (n=412) vs 0.62 (n=5000): −50.0% [−55.1%, −44.9%]; ...``"""
    parts = []
    for t in tests:
        change = t["relative_change"]
        lo, hi = change["interval"]
        rel = "–" if change["value"] is None else f"{change['value']:+.1%}"
        ci = "" if lo is None or hi is None else f" [{lo:+.1%}, {hi:+.1%}]"
        parts.append(
            f"{t['metric']} {_fmt(t['now']['value'])} (n={_fmt(t['now']['n'])}) vs "
            f"{_fmt(t['baseline']['value'])} (n={_fmt(t['baseline']['n'])}): {rel}{ci}")
    return "; ".join(parts)
