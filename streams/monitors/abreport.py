"""The A/B report: changes with confidence intervals, and a sample-ratio check.

Each row compares per-trajectory means of the candidate against the baseline. Rates, kept edits
and latency change relatively, ``m1/m0 − 1``, with a delta-method interval
(``stats.relative_change``); the reward, a signed score with no natural zero (a relative change
of it flips sign with its baseline), changes as a difference ``m1 − m0`` in reward units
(``stats.difference``), and so does a rate whose baseline is 0 (no relative change from
nothing, but a difference still has an interval). The sample-ratio mismatch (SRM) check is
Pearson's chi-square of the trajectory counts against the intended split; a p-value under
``srm_alpha`` means the assignment, not the policy, may explain the differences, and the table
should not be trusted.

The rewards topic may hold a record twice (the reward join is at-least-once; a repeat is
identical): each record key counts once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from schemas.metrics import MetricStat
from schemas.rewards import RewardRecord
from streams.monitors.errors import MonitorInputError
from streams.monitors.stats import (
    PairMoments,
    adjusted_difference_of,
    chi_square_sf,
    difference,
    relative_change,
    z_for_confidence,
)
from streams.monitors.windows import reward_contributions, reward_record_id

__all__ = ["ROWS", "AbReport", "AbRow", "AbTally", "build_report", "format_change", "format_report",
           "sample_ratio_mismatch"]

Scale = Literal["relative", "difference"]

# (label, metric of reward_contributions, which way is better, how its change is expressed)
ROWS: tuple[tuple[str, str, str, Scale], ...] = (
    ("Edits kept (per trajectory)", "kept_edits", "up", "relative"),
    ("Dissatisfied follow-ups", "dissatisfied_followup_rate", "down", "relative"),
    ("Latency (ms)", "latency_ms", "down", "relative"),
    ("Broken tool calls (trajectories)", "broken_call_trajectory_rate", "down", "relative"),
    ("Reward", "reward", "up", "difference"),
)


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else value


@dataclass(frozen=True)
class AbRow:
    label: str
    metric: str
    better: str
    scale: Scale
    baseline: float
    candidate: float
    change: float  # relative (0.1 = +10%) or a difference in the metric's units, per ``scale``
    low: float
    high: float
    se: float = math.nan  # the change's standard error (the interval is change ± z·se)

    @property
    def verdict(self) -> str:
        if math.isnan(self.low) or self.low <= 0 <= self.high:
            return "no significant change"
        improved = (self.low > 0) == (self.better == "up")
        return "better" if improved else "worse"

    def evidence(self) -> dict[str, Any]:
        return {"metric": self.metric, "scale": self.scale, "better": self.better,
                "baseline": _finite(self.baseline), "candidate": _finite(self.candidate),
                "change": _finite(self.change), "low": _finite(self.low),
                "high": _finite(self.high), "verdict": self.verdict}


@dataclass(frozen=True)
class AbReport:
    baseline: str
    candidate: str
    n_baseline: int
    n_candidate: int
    shares: tuple[float, float]  # the intended split, baseline/candidate
    confidence: float
    rows: tuple[AbRow, ...]
    srm_statistic: float
    srm_p_value: float
    srm_alpha: float
    # With a covariate: the share of the reward difference's variance it removed (CUPED)
    reward_variance_reduction: float | None = None

    @property
    def srm_detected(self) -> bool:
        return self.srm_p_value < self.srm_alpha

    def row(self, metric: str) -> AbRow:
        return next(r for r in self.rows if r.metric == metric)

    @classmethod
    def from_evidence(cls, evidence: Mapping[str, Any]) -> AbReport:
        """The report a registry event recorded (``evidence``), to show it again."""
        labels = {metric: label for label, metric, _, _ in ROWS}

        def number(value: float | None) -> float:
            return math.nan if value is None else float(value)

        rows = tuple(AbRow(labels.get(r["metric"], r["metric"]), r["metric"], r["better"],
                           r["scale"], *(number(r[k]) for k in ("baseline", "candidate",
                                                                 "change", "low", "high")))
                     for r in evidence["rows"])
        srm = evidence["srm"]
        return cls(evidence["baseline"], evidence["candidate"], evidence["n_baseline"],
                   evidence["n_candidate"], tuple(evidence["shares"]),
                   evidence["confidence"], rows, srm["statistic"], srm["p_value"], srm["alpha"],
                   evidence.get("reward_variance_reduction"))

    def evidence(self) -> dict[str, Any]:
        """JSON-able: what a registry event records of the A/B."""
        return {"baseline": self.baseline, "candidate": self.candidate,
                "n_baseline": self.n_baseline, "n_candidate": self.n_candidate,
                "shares": list(self.shares), "confidence": self.confidence,
                "rows": [r.evidence() for r in self.rows],
                "srm": {"statistic": self.srm_statistic, "p_value": self.srm_p_value,
                        "alpha": self.srm_alpha, "detected": self.srm_detected},
                "reward_variance_reduction": self.reward_variance_reduction}


def sample_ratio_mismatch(counts: list[int], shares: list[float]) -> tuple[float, float]:
    """Pearson χ² of observed counts against expected shares, and its p-value (df = k − 1)."""
    total, share_sum = sum(counts), sum(shares)
    if total == 0 or len(counts) != len(shares) or len(counts) < 2:
        raise MonitorInputError("shares: give one positive share per arm and at least two arms")
    expected = [total * s / share_sum for s in shares]
    statistic = sum((o - e) ** 2 / e for o, e in zip(counts, expected, strict=False))
    return statistic, chi_square_sf(statistic, len(counts) - 1)


class AbTally:
    """The report's evidence as a fold: each trajectory's contributions added to its side
    (``baseline`` or ``candidate`` name), once per record key, with its covariate (None: none).
    ``build_report`` folds a list of records; the release controller folds the reward stream
    and reads a report whenever it looks."""

    def __init__(self) -> None:
        self.sums: dict[str, dict[str, list[float]]] = {}  # side → metric → [n, sum, sumsq]
        self.rewards: dict[str, PairMoments] = {}
        self._seen: set[str] = set()

    def add(self, side: str, contributions: Mapping[str, tuple[float, float]],
            covariate: float | None = None, key: str | None = None) -> bool:
        """Fold one trajectory; False (nothing added) for a key already folded."""
        if key is not None:
            if key in self._seen:
                return False
            self._seen.add(key)
        sums = self.sums.setdefault(side, {})
        for _, metric, _, _ in ROWS:
            value = contributions[metric][1]
            stat = sums.setdefault(metric, [0.0, 0.0, 0.0])
            stat[0] += 1
            stat[1] += value
            stat[2] += value * value
        self.rewards.setdefault(side, PairMoments()).add(contributions["reward"][1], covariate)
        return True

    def count(self, side: str) -> int:
        return self.rewards[side].n if side in self.rewards else 0

    def report(self, baseline: str, candidate: str, *, shares: tuple[float, float] = (1.0, 1.0),
               confidence: float = 0.95, srm_alpha: float = 0.001,
               adjust: bool = False) -> AbReport:
        """The report of the sides folded so far (each needs a record); ``adjust``: the reward's
        difference adjusted for the covariates (``stats.adjusted_difference_of``)."""
        z = z_for_confidence(confidence)
        adjusted = (adjusted_difference_of(self.rewards[baseline], self.rewards[candidate], z)
                    if adjust else None)
        rows = []
        for label, metric, better, scale in ROWS:
            s0, s1 = (MetricStat(n=n, sum=total, sumsq=squares) for n, total, squares in
                      (self.sums[baseline][metric], self.sums[candidate][metric]))
            if s0.mean == 0:
                scale = "difference"
            change = relative_change if scale == "relative" else difference
            value, lo, hi = change(s0.mean, s0.variance, s0.n, s1.mean, s1.variance, s1.n, z)
            se = (hi - value) / z
            if metric == "reward" and adjusted is not None:
                value, lo, hi, _, se = adjusted
            rows.append(AbRow(label, metric, better, scale, s0.mean, s1.mean, value, lo, hi, se))
        n0, n1 = self.count(baseline), self.count(candidate)
        statistic, p_value = sample_ratio_mismatch([n0, n1], list(shares))
        return AbReport(baseline, candidate, n0, n1, shares, confidence, tuple(rows), statistic,
                        p_value, srm_alpha, adjusted[3] if adjusted is not None else None)


def build_report(
    records: Iterable[RewardRecord], baseline: str, candidate: str, *, by: str = "arm",
    shares: tuple[float, float] = (1.0, 1.0), confidence: float = 0.95,
    srm_alpha: float = 0.001, org: str | None = None,
    covariates: Mapping[str, float] | None = None,
) -> AbReport:
    """Compare records whose ``by`` field ("arm" or "checkpoint") is baseline vs candidate;
    those of one ``org`` only when it is given. ``covariates`` (trajectory id → a value measured
    before the split, such as the same task's reward in an earlier cycle) adjust the reward's
    difference (``stats.adjusted_difference``); a trajectory without one is not adjusted."""
    field = {"arm": "arm", "checkpoint": "checkpoint_id"}.get(by)
    if field is None:
        raise MonitorInputError(f"by={by!r}: choose 'arm' or 'checkpoint'")
    tally = AbTally()
    for record in records:
        side = getattr(record, field)
        if (org is not None and record.org_id != org) or side not in (baseline, candidate):
            continue
        tally.add(side, reward_contributions(record), (covariates or {}).get(
            record.trajectory_id), reward_record_id(record))
    for name in (baseline, candidate):
        if tally.count(name) == 0:
            raise MonitorInputError(
                f"--{'baseline' if name == baseline else 'candidate'} {name!r}: no reward records "
                f"with that {by}{f' of org {org!r}' if org else ''}; check the name or use "
                "--by checkpoint")
    return tally.report(baseline, candidate, shares=shares, confidence=confidence,
                        srm_alpha=srm_alpha, adjust=bool(covariates))


def format_change(value: float, scale: Scale) -> str:
    """``+12.30%`` for a relative change, ``+0.152`` for a difference; ``n/a`` when unmeasured."""
    if math.isnan(value):
        return "n/a"
    return f"{value:+.2%}" if scale == "relative" else f"{value:+.3f}"


def format_report(report: AbReport, names: tuple[str, str] = ("baseline", "candidate")) -> str:
    """The report as a plain-text table; ``names`` head the two arms' columns."""
    share = sum(report.shares)
    head = (f"A/B report: {names[1]} {report.candidate} (n={report.n_candidate}) vs {names[0]} "
            f"{report.baseline} (n={report.n_baseline}), split "
            f"{report.shares[0] / share:.0%}/{report.shares[1] / share:.0%}, "
            f"{report.confidence:.0%} intervals; reward as a difference, the rest relative")
    lines = [head, "",
             f"{'metric':34} {names[0]:>11} {names[1]:>11} {'change':>9}  "
             f"{'interval':>21}  verdict"]
    for r in report.rows:
        interval = f"[{format_change(r.low, r.scale)}, {format_change(r.high, r.scale)}]"
        lines.append(f"{r.label:34} {r.baseline:11.4g} {r.candidate:11.4g} "
                     f"{format_change(r.change, r.scale):>9}  {interval:>21}  {r.verdict}")
    srm = (f"SAMPLE RATIO MISMATCH (p={report.srm_p_value:.2g} < {report.srm_alpha}): the split "
           "is off; do not trust the table until assignment is fixed"
           if report.srm_detected else
           f"sample ratio ok: chi-square {report.srm_statistic:.3f}, p={report.srm_p_value:.3g}")
    notes = [srm]
    if report.reward_variance_reduction is not None:
        notes.append("reward change adjusted for each trajectory's covariate (CUPED: the same "
                     "task's reward before the split), which removed "
                     f"{report.reward_variance_reduction:.0%} of its variance; the columns are "
                     "unadjusted means")
    return "\n".join([*lines, "", *notes])
