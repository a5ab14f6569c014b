"""The evidence an alert carries: baseline vs now, sample sizes, intervals, the CUSUM state, the
parts that moved; and its one-line summary in the units staff read (milliseconds, rates, reward
points), not the scale a test runs on."""

from __future__ import annotations

import math
from typing import Any

from schemas.metrics import COMPONENT_METRIC_PREFIX, MetricStat
from streams.monitors.config import TestSpec
from streams.monitors.stats import difference, relative_change, wilson_interval, z_for_confidence

__all__ = ["describe_test", "effective", "shows_change", "summary_line"]

# Metrics measured in milliseconds; a ``log_`` metric is shown as its geometric mean, in ms.
_MILLISECONDS = {"latency_ms", "ttft_ms", "log_latency"}
_PARTS_SHOWN = 4  # parts named in the summary line, the largest moves first


def _rounded(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)


def effective(test: TestSpec, stat: MetricStat) -> MetricStat:
    """The statistics a test reads: a clustered rate's weights divided by its dispersion."""
    if test.dispersion == 1.0:
        return stat
    d = test.dispersion
    return MetricStat(n=stat.n / d, sum=stat.sum / d, sumsq=stat.sumsq / d)


def _side(test: TestSpec, stat: MetricStat, windows: int, z: float) -> dict[str, Any]:
    """Value, weight and interval of one side (baseline or now)."""
    if test.family == "poisson":
        mean = stat.sum / windows if windows else math.nan
        half = z * math.sqrt(mean / windows) if windows else math.nan
        return {"value": _rounded(mean), "n": windows, "unit": "events per window",
                "interval": [_rounded(mean - half), _rounded(mean + half)]}
    if test.family == "bernoulli":
        tested = effective(test, stat)
        lo, hi = wilson_interval(tested.sum, tested.n, z)
        return {"value": _rounded(stat.mean), "n": stat.n, "interval": [_rounded(lo), _rounded(hi)]}
    half = z * math.sqrt(stat.variance / stat.n) if stat.n >= 2 else math.nan
    side = {"value": _rounded(stat.mean), "n": stat.n,
            "interval": [_rounded(stat.mean - half), _rounded(stat.mean + half)]}
    if test.metric.startswith("log_"):  # report the geometric mean on the natural scale
        side["geometric_mean"] = _rounded(math.exp(stat.mean)) if stat.n else None
    return side


def _variance(test: TestSpec, stat: MetricStat, windows: int) -> tuple[float, float, float]:
    """(mean, per-unit variance, units) for the interval of the change."""
    if test.family == "poisson":
        mean = stat.sum / windows if windows else math.nan
        return mean, mean, float(windows)
    if test.family == "bernoulli":
        return stat.mean, stat.mean * (1 - stat.mean), effective(test, stat).n
    return stat.mean, stat.variance, stat.n


def _change(test: TestSpec, base: MetricStat, now: MetricStat, windows: tuple[int, int],
            z: float) -> dict[str, Any]:
    m0, v0, n0 = _variance(test, base, windows[0])
    m1, v1, n1 = _variance(test, now, windows[1])
    if test.metric.startswith("log_"):  # a difference of logs is a ratio of geometric means
        if n0 < 2 or n1 < 2:
            return {"scale": test.scale, "value": None, "interval": [None, None]}
        diff, se = m1 - m0, math.sqrt(v0 / n0 + v1 / n1)
        rel, lo, hi = math.expm1(diff), math.expm1(diff - z * se), math.expm1(diff + z * se)
    elif any(math.isnan(x) for x in (m0, v0, m1, v1)):
        rel = lo = hi = math.nan
    else:
        change = difference if test.scale == "difference" else relative_change
        rel, lo, hi = change(m0, v0, n0, m1, v1, n1, z)
    return {"scale": test.scale, "value": _rounded(rel), "interval": [_rounded(lo), _rounded(hi)]}


def _parts(test: TestSpec, now: dict[str, MetricStat], base: dict[str, MetricStat],
           z: float) -> list[dict[str, Any]]:
    """How each part moved (a difference of means, in the parts' units), largest first."""
    moved = []
    for name in sorted(set(now) | {k for k in base if k.startswith(test.parts)}):
        s0, s1 = base.get(name, MetricStat()), now.get(name, MetricStat())
        if s0.n < 2 or s1.n < 2:
            continue
        diff, lo, hi = difference(s0.mean, s0.variance, s0.n, s1.mean, s1.variance, s1.n, z)
        moved.append({"part": name.removeprefix(test.parts), "baseline": _rounded(s0.mean),
                      "now": _rounded(s1.mean), "change": _rounded(diff),
                      "interval": [_rounded(lo), _rounded(hi)]})
    return sorted(moved, key=lambda part: -abs(part["change"]))


def describe_test(
    test: TestSpec, now: MetricStat, base: MetricStat, windows: tuple[int, int],
    statistic: float, null: float, alternative: float, confidence: float,
    parts: tuple[dict[str, MetricStat], dict[str, MetricStat]] = ({}, {}),
) -> dict[str, Any]:
    """One test's evidence; ``windows`` = (baseline windows, windows since the CUSUM left 0);
    ``parts`` = (now, baseline) statistics of the metrics the tested one is the sum of."""
    z = z_for_confidence(confidence)
    evidence = {
        "metric": test.metric, "family": test.family, "direction": test.direction,
        "confidence": confidence,
        "baseline": _side(test, base, windows[0], z), "now": _side(test, now, windows[1], z),
        "change": _change(test, base, now, windows, z),
        "cusum": round(statistic, 3), "null": _rounded(null), "alternative": _rounded(alternative),
    }
    if test.parts:
        evidence["parts"] = _parts(test, parts[0], parts[1], z)
    if test.dispersion != 1.0:
        evidence["dispersion"] = test.dispersion
    return evidence


def shows_change(test: dict[str, Any], at_least: float = 0.0) -> bool:
    """Whether a test's interval of the change excludes every change smaller than ``at_least``
    (0: no change), on the side the test watches (above for ``up``, below for ``down``); False
    when there is no interval."""
    low, high = test["change"]["interval"]
    if low is None or high is None:
        return False
    return bool(low > at_least) if test["direction"] == "up" else bool(high < -at_least)


def _value(metric: str, value: float | None) -> str:
    if value is None:
        return "–"
    if metric in _MILLISECONDS:
        return f"{math.exp(value) if metric.startswith('log_') else value:,.0f} ms"
    signed = metric == "reward" or metric.startswith(COMPONENT_METRIC_PREFIX)
    return f"{value:+.3f}" if signed else f"{value:.4g}"


def _label(metric: str) -> str:
    """``log_latency`` → ``latency (geometric mean)``: the scale a test runs on is not the one
    staff read."""
    if metric.startswith("log_"):
        return f"{metric.removeprefix('log_')} (geometric mean)"
    return metric


def _changed(change: dict[str, Any]) -> str:
    """``-50.0% [-55.1%, -44.9%]``; a rise past double as a factor, ``×34.1 [×30.2, ×38.4]``;
    a difference in the metric's units, ``-0.297 [-0.612, +0.018]``."""
    value = change["value"]
    if value is None:
        return "–"
    form = ("{:+.3f}".format if change["scale"] == "difference"
            else _factor if value >= 1 else "{:+.1%}".format)
    lo, hi = change["interval"]
    return form(value) + ("" if lo is None or hi is None else f" [{form(lo)}, {form(hi)}]")


def _factor(relative: float) -> str:
    return f"×{1 + relative:.1f}"


def _moved(parts: list[dict[str, Any]]) -> str:
    """``moved: kept_3600s -0.200 [-0.310, -0.090], dissatisfied -0.070 [...]``."""
    shown = [p for p in parts if abs(p["change"]) >= 0.005][:_PARTS_SHOWN]
    if not shown:
        return ""
    return "; moved: " + ", ".join(
        f"{p['part']} {p['change']:+.3f} [{p['interval'][0]:+.3f}, {p['interval'][1]:+.3f}]"
        for p in shown)


def summary_line(tests: list[dict[str, Any]]) -> str:
    """``edit_rate 0.31 (n=412) vs 0.62 (n=5,000): -50.0% [-55.1%, -44.9%]; ...``"""
    lines = []
    for t in tests:
        metric = t["metric"]
        now, base = t["now"], t["baseline"]
        lines.append(
            f"{_label(metric)} {_value(metric, now['value'])} (n={now['n']:,.0f}) vs "
            f"{_value(metric, base['value'])} (n={base['n']:,.0f}): {_changed(t['change'])}"
            + _moved(t.get("parts", [])))
    return "; ".join(lines)
