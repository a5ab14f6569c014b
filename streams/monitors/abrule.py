"""The fixed-size A/B rule: when one A/B table says a candidate is non-inferior. Pure.

``rewardstream ab report --margin`` judges one table (``abreport``) by it; a running canary is
decided instead by the sequential rule (``streams.release.rule``), which shares its guardrails
and tolerances. A table passes when, in this order:

1. the split is what was intended: no sample-ratio mismatch (SRM p-value ≥ its alpha); else the
   arms are not comparable and nothing else is read;
2. the primary metric is non-inferior: its interval rules out a loss larger than ``margin``
   (for the reward, a higher-is-better difference: the lower bound is above −margin);
3. no guardrail is worse beyond its tolerance: its interval does not lie wholly beyond the
   tolerance on the worse side (a relative change past ``guardrail_relative_tolerance``, or, for
   a rate that rises from 0 and so is a difference, past ``guardrail_difference_tolerance``).
   A zero tolerance would let any significant drift veto: a candidate that mends a production
   which made no tool calls at all (and so broke none) was refused for its broken calls while
   its reward was far better (docs/trainer-and-release.md#the-sequential-rule).

Latency is reported but not a guardrail by default: the canary's latency is the serving stack's
as much as the candidate's (on the torch engine two live adapters are each merged into their own
copy and cost what the base does; a third, during a promotion, is served unmerged and slower;
vLLM batches adapters its own way), and the monitors' latency detector watches each checkpoint
once it serves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from streams.monitors.abreport import AbReport, AbRow, format_change
from streams.monitors.errors import MonitorConfigError

__all__ = ["AbRule", "AbVerdict", "judge_ab"]


@dataclass(frozen=True)
class AbRule:
    primary: str = "reward"
    margin: float = 0.75  # the loss of the primary metric that must be ruled out (its units)
    guardrails: tuple[str, ...] = ("kept_edits", "dissatisfied_followup_rate",
                                   "broken_call_trajectory_rate")
    guardrail_relative_tolerance: float = 0.25  # a guardrail 25% worse, with confidence, fails
    guardrail_difference_tolerance: float = 0.05  # a rate from 0: 5 points worse fails

    def __post_init__(self) -> None:
        for name in ("margin", "guardrail_relative_tolerance", "guardrail_difference_tolerance"):
            if not getattr(self, name) >= 0:
                raise MonitorConfigError(f"{name}={getattr(self, name)}: it is ≥ 0")

    def tolerance(self, row: AbRow) -> float:
        return (self.guardrail_relative_tolerance if row.scale == "relative"
                else self.guardrail_difference_tolerance)

    def describe(self) -> str:
        return (f"no sample-ratio mismatch; {self.primary} non-inferior (its interval rules out a "
                f"loss of {self.margin:g}); no guardrail ({', '.join(self.guardrails)}) worse "
                f"beyond its tolerance ({self.guardrail_relative_tolerance:.0%}, or "
                f"{self.guardrail_difference_tolerance:g} for a rate from 0) with confidence")


@dataclass(frozen=True)
class AbVerdict:
    passed: bool
    reason: str  # one line: what decided

    def evidence(self, report: AbReport, rule: AbRule) -> dict[str, Any]:
        """JSON-able: the verdict, the rule it applied and the report it read."""
        return {"passed": self.passed, "reason": self.reason, "rule": rule.describe(),
                "primary": rule.primary, "margin": rule.margin,
                "guardrail_tolerance": {"relative": rule.guardrail_relative_tolerance,
                                        "difference": rule.guardrail_difference_tolerance},
                **report.evidence()}


def _shown(row: AbRow) -> str:
    interval = f"[{format_change(row.low, row.scale)}, {format_change(row.high, row.scale)}]"
    return f"{row.metric} {format_change(row.change, row.scale)} {interval}"


def _worst_end(row: AbRow) -> float:
    """The end of the interval on the worse side, signed so that a loss is negative."""
    return row.low if row.better == "up" else -row.high


def _best_end(row: AbRow) -> float:
    """The end of the interval on the better side, signed so that a loss is negative."""
    return row.high if row.better == "up" else -row.low


def judge_ab(report: AbReport, rule: AbRule) -> AbVerdict:
    """Apply ``rule`` to ``report`` (see the module docstring)."""
    if report.srm_detected:
        return AbVerdict(False, f"sample ratio mismatch (p={report.srm_p_value:.2g} < "
                                f"{report.srm_alpha}): the arms are not comparable")
    primary = report.row(rule.primary)
    worst = _worst_end(primary)
    if math.isnan(worst):
        return AbVerdict(False, f"{rule.primary} has no interval (too few trajectories)")
    if worst <= -rule.margin:
        return AbVerdict(False, f"{_shown(primary)} does not rule out a loss of {rule.margin:g}")
    for metric in rule.guardrails:
        row = report.row(metric)
        tolerance = rule.tolerance(row)
        if _best_end(row) < -tolerance:
            return AbVerdict(False, f"guardrail {_shown(row)} is worse beyond its tolerance "
                                    f"{format_change(tolerance, row.scale).lstrip('+')}")
    return AbVerdict(True, f"{_shown(primary)} rules out a loss of {rule.margin:g}; "
                           "no guardrail worse beyond its tolerance")
