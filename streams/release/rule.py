"""The canary's sequential rule: at every look, promote, reject or keep collecting. Pure.

It reads the same A/B report as ``rewardstream ab report`` and the fixed-size rule
(``streams.monitors.abreport``, ``abrule``: the same metrics, guardrails and covariate
adjustment), but replaces its fixed 95% intervals with always-valid bounds
(``streams.release.sequential``), so the canary may be looked at after every batch and stop as
soon as the evidence decides. At each look, in this order:

1. fewer than ``min_per_arm`` trajectories on an arm: keep collecting (the variance estimate
   needs some);
2. **sample ratio**: the sequential test of the split flags a mismatch → reject;
3. **guardrails**: one is surely worse beyond its tolerance (its always-valid bound on the
   better side lies past it) → reject;
4. **surely worse**: the primary's upper bound is below 0 → reject;
5. **non-inferior**: the primary's lower bound is above ``−margin`` → promote;
6. at ``max_trajectories`` or ``max_duration_s`` without a decision → reject (non-inferiority
   was not shown);
7. else keep collecting, and say how many more trajectories a decision needs if the estimate
   and its spread stay as they are.

A candidate worse than production by the margin or more is promoted with probability at most
``alpha`` (the lower bound is a one-sided ``1 − alpha`` confidence sequence), whenever it is
looked at.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from streams.monitors.abreport import AbReport, AbRow
from streams.monitors.abrule import AbRule
from streams.monitors.errors import MonitorConfigError
from streams.release.sequential import information_needed, radius, srm_log_bayes_factor

__all__ = ["Bound", "Look", "SequentialRule", "judge_look"]

Decision = Literal["promote", "reject", "continue"]


@dataclass(frozen=True)
class SequentialRule:
    margin: float = 0.15  # the primary's loss non-inferiority rules out (its units)
    alpha: float = 0.05  # most chance of promoting a candidate worse by the margin
    tau: float | None = None  # the mixture's scale (None: the margin); tightest near it
    guardrails: tuple[str, ...] = AbRule.guardrails
    guardrail_relative_tolerance: float = AbRule.guardrail_relative_tolerance
    guardrail_difference_tolerance: float = AbRule.guardrail_difference_tolerance
    srm_alpha: float = 0.001
    srm_concentration: float = 100.0  # the split test's prior: Beta(c·share, c·(1 − share))
    min_per_arm: int = 30
    max_trajectories: int = 10_000  # both arms; reached undecided, the canary is rejected
    max_duration_s: float = 86_400.0
    primary: str = field(default="reward", repr=False)

    def __post_init__(self) -> None:
        for name in ("margin", "guardrail_relative_tolerance", "guardrail_difference_tolerance"):
            if not getattr(self, name) >= 0:
                raise MonitorConfigError(f"{name}={getattr(self, name)}: it is ≥ 0")
        for name in ("alpha", "srm_alpha"):
            if not 0 < getattr(self, name) < 1:
                raise MonitorConfigError(f"{name}={getattr(self, name)}: it is in (0, 1)")
        positive = ("srm_concentration", "min_per_arm", "max_trajectories", "max_duration_s")
        for name in positive:
            if not getattr(self, name) > 0:
                raise MonitorConfigError(f"{name}={getattr(self, name)}: it is > 0")
        if self.tau is not None and not self.tau > 0:
            raise MonitorConfigError(f"tau={self.tau}: it is > 0 (or unset: the margin)")
        if self.margin == 0 and self.tau is None:
            raise MonitorConfigError("margin=0 needs an explicit tau (the mixture's scale)")

    @property
    def scale(self) -> float:
        return self.tau if self.tau is not None else self.margin

    def tolerance(self, row: AbRow) -> float:
        return (self.guardrail_relative_tolerance if row.scale == "relative"
                else self.guardrail_difference_tolerance)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "guardrails": list(self.guardrails)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SequentialRule:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise MonitorConfigError(f"unknown rule parameter(s) {unknown}; known: "
                                     f"{sorted(known)}")
        return cls(**{**data, "guardrails": tuple(data.get("guardrails", cls.guardrails))})

    def describe(self) -> str:
        return (f"sequential non-inferiority: promote once the {self.primary}'s always-valid "
                f"lower bound (one-sided, alpha {self.alpha:g}, normal mixture tau "
                f"{self.scale:g}) is above -{self.margin:g}; reject once its upper bound is "
                f"below 0, a guardrail ({', '.join(self.guardrails)}) is surely worse beyond "
                f"{self.guardrail_relative_tolerance:.0%} (or "
                f"{self.guardrail_difference_tolerance:g} for a rate from 0), the split is off "
                f"(sequential test, alpha {self.srm_alpha:g}), or at {self.max_trajectories} "
                f"trajectories or {self.max_duration_s / 3600:g} h undecided")


@dataclass(frozen=True)
class Bound:
    """A change with its always-valid bounds, signed as the report shows it."""

    metric: str
    change: float
    se: float
    low: float
    high: float

    def evidence(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Look:
    decision: Decision
    reason: str  # one line: what decided, or what is awaited
    n_baseline: int
    n_candidate: int
    elapsed_s: float
    primary: Bound
    guardrails: tuple[Bound, ...]
    srm_log_bayes_factor: float
    needed: int | None  # more trajectories a decision needs at the current effect and spread

    def evidence(self, report: AbReport, rule: SequentialRule) -> dict[str, Any]:
        """JSON-able: what a registry event records of the look."""
        return {"decision": self.decision, "reason": self.reason,
                "passed": self.decision == "promote", "rule": rule.describe(),
                "parameters": rule.to_dict(), "elapsed_s": self.elapsed_s,
                "primary_bound": self.primary.evidence(),
                "guardrail_bounds": [g.evidence() for g in self.guardrails],
                "srm_log_bayes_factor": self.srm_log_bayes_factor,
                "srm_threshold": math.log(1 / rule.srm_alpha), "needed": self.needed,
                **report.evidence()}


def _bound(row: AbRow, alpha: float, tau: float) -> Bound:
    r = radius(1.0 / (row.se * row.se), alpha, tau) if row.se > 0 else \
        (0.0 if row.se == 0 else math.inf)
    return Bound(row.metric, row.change, row.se, row.change - r, row.change + r)


def _signed(bound: Bound, better: str) -> tuple[float, float]:
    """(worst end, best end), signed so that a loss is negative."""
    return (bound.low, bound.high) if better == "up" else (-bound.high, -bound.low)


def _needed(row: AbRow, n_total: int, rule: SequentialRule) -> int | None:
    """Trajectories beyond ``n_total`` until the primary's bound clears either boundary, were
    its estimate to stay and its variance to shrink as 1/n."""
    if not (row.se > 0 and math.isfinite(row.change)):
        return None
    per_trajectory = row.se * row.se * n_total  # se² = per_trajectory / n
    signed = row.change if row.better == "up" else -row.change
    gaps = (signed + rule.margin, -signed)  # to promote, to reject
    needed = [info for gap in gaps
              if (info := information_needed(gap, rule.alpha, rule.scale)) is not None]
    if not needed:
        return None
    return max(0, math.ceil(min(needed) * per_trajectory) - n_total)


def _shown(bound: Bound, scale: str) -> str:
    if scale == "relative":
        return f"{bound.metric} {bound.change:+.1%} [{bound.low:+.1%}, {bound.high:+.1%}]"
    return f"{bound.metric} {bound.change:+.3f} [{bound.low:+.3f}, {bound.high:+.3f}]"


def judge_look(report: AbReport, rule: SequentialRule, elapsed_s: float) -> Look:
    """Apply ``rule`` to ``report`` (baseline: production, candidate: the canary) after
    ``elapsed_s`` seconds of canary (see the module docstring)."""
    n0, n1 = report.n_baseline, report.n_candidate
    row = report.row(rule.primary)
    primary = _bound(row, rule.alpha, rule.scale)
    guardrail_rows = [report.row(m) for m in rule.guardrails]
    guardrails = tuple(_bound(g, rule.alpha, rule.tolerance(g) or rule.scale)
                       for g in guardrail_rows)
    share = report.shares[1] / sum(report.shares)
    srm = srm_log_bayes_factor(n1, n0, share, rule.srm_concentration)
    at_most = n0 + n1 >= rule.max_trajectories or elapsed_s >= rule.max_duration_s

    def look(decision: Decision, reason: str, needed: int | None = None) -> Look:
        return Look(decision, reason, n0, n1, elapsed_s, primary, guardrails, srm, needed)

    limit = (f"at the maximum ({n0 + n1} of {rule.max_trajectories} trajectories, "
             f"{elapsed_s / 3600:.2g} of {rule.max_duration_s / 3600:g} h)")
    if min(n0, n1) < rule.min_per_arm:
        if at_most:
            return look("reject", f"{limit} with fewer than {rule.min_per_arm} trajectories "
                                  "on an arm")
        short = max(rule.min_per_arm - n0, rule.min_per_arm - n1)
        return look("continue", f"waiting for {rule.min_per_arm} trajectories on each arm "
                                f"(production {n0}, canary {n1})", short)
    if srm >= math.log(1 / rule.srm_alpha):
        return look("reject", f"sample ratio mismatch: {n1} canary of {n0 + n1} against a "
                              f"share of {share:.0%} (log Bayes factor {srm:.1f})")
    for g_row, bound in zip(guardrail_rows, guardrails, strict=True):
        tolerance = rule.tolerance(g_row)
        if _signed(bound, g_row.better)[1] < -tolerance:
            return look("reject", f"guardrail {_shown(bound, g_row.scale)} is surely worse "
                                  f"beyond its tolerance {tolerance:g}")
    shown = _shown(primary, row.scale)
    worst, best = _signed(primary, row.better)
    if best < 0:
        return look("reject", f"{shown}: surely worse than production")
    if worst > -rule.margin:
        return look("promote", f"{shown} rules out a loss of {rule.margin:g}; no guardrail "
                               "surely worse beyond its tolerance")
    if at_most:
        return look("reject", f"{shown} {limit}: non-inferiority at {rule.margin:g} not shown")
    needed = _needed(row, n0 + n1, rule)
    awaited = (f"about {needed} more trajectories at this effect" if needed is not None
               else "no decision in sight at this effect")
    if needed is not None and n0 + n1 + needed > rule.max_trajectories:
        awaited += f", past the maximum of {rule.max_trajectories}"
    return look("continue", f"{shown}: undecided, {awaited}", needed)
