"""The A/B report: relative changes with confidence intervals, and a sample-ratio check.

Each row compares per-trajectory means of the candidate against the baseline: relative change
``m1/m0 − 1`` with a delta-method interval (``stats.relative_change``). The sample-ratio
mismatch (SRM) check is Pearson's chi-square of the trajectory counts against the intended
split; a p-value under ``srm_alpha`` means the assignment, not the policy, may explain the
differences, and the table should not be trusted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from schemas.metrics import MetricStat
from schemas.rewards import RewardRecord
from streams.monitors.errors import MonitorInputError
from streams.monitors.stats import chi_square_sf, relative_change, z_for_confidence
from streams.monitors.windows import reward_contributions

__all__ = ["ROWS", "AbReport", "AbRow", "build_report", "format_report", "sample_ratio_mismatch"]

# (label, metric of reward_contributions, which way is better)
ROWS: tuple[tuple[str, str, str], ...] = (
    ("Edits kept (per trajectory)", "kept_edits", "up"),
    ("Dissatisfied follow-ups", "dissatisfied_followup_rate", "down"),
    ("Latency (ms)", "latency_ms", "down"),
    ("Reward", "reward", "up"),
    ("Broken tool calls (trajectories)", "broken_call_trajectory_rate", "down"),
)


@dataclass(frozen=True)
class AbRow:
    label: str
    metric: str
    better: str
    baseline: float
    candidate: float
    relative: float
    low: float
    high: float

    @property
    def verdict(self) -> str:
        if math.isnan(self.low) or self.low <= 0 <= self.high:
            return "no significant change"
        improved = (self.low > 0) == (self.better == "up")
        return "better" if improved else "worse"


@dataclass(frozen=True)
class AbReport:
    baseline: str
    candidate: str
    n_baseline: int
    n_candidate: int
    confidence: float
    rows: tuple[AbRow, ...]
    srm_statistic: float
    srm_p_value: float
    srm_alpha: float

    @property
    def srm_detected(self) -> bool:
        return self.srm_p_value < self.srm_alpha


def sample_ratio_mismatch(counts: list[int], shares: list[float]) -> tuple[float, float]:
    """Pearson χ² of observed counts against expected shares, and its p-value (df = k − 1)."""
    total, share_sum = sum(counts), sum(shares)
    if total == 0 or len(counts) != len(shares) or len(counts) < 2:
        raise MonitorInputError("shares: give one positive share per arm and at least two arms")
    expected = [total * s / share_sum for s in shares]
    statistic = sum((o - e) ** 2 / e for o, e in zip(counts, expected))
    return statistic, chi_square_sf(statistic, len(counts) - 1)


def _accumulate(records: Iterable[RewardRecord], arm_of) -> dict[str, dict[str, MetricStat]]:
    sides: dict[str, dict[str, list[float]]] = {}
    for record in records:
        side = arm_of(record)
        if side is None:
            continue
        sums = sides.setdefault(side, {})
        contributions = reward_contributions(record)
        for _, metric, _ in ROWS:
            _, value = contributions[metric]
            n, total, squares = sums.get(metric, (0.0, 0.0, 0.0))
            sums[metric] = [n + 1, total + value, squares + value * value]
    return {side: {m: MetricStat(n=v[0], sum=v[1], sumsq=v[2]) for m, v in sums.items()}
            for side, sums in sides.items()}


def build_report(
    records: Iterable[RewardRecord], baseline: str, candidate: str, *, by: str = "arm",
    shares: tuple[float, float] = (1.0, 1.0), confidence: float = 0.95,
    srm_alpha: float = 0.001,
) -> AbReport:
    """Compare records whose ``by`` field ("arm" or "checkpoint") is baseline vs candidate."""
    field = {"arm": "arm", "checkpoint": "checkpoint_id"}.get(by)
    if field is None:
        raise MonitorInputError(f"by={by!r}: choose 'arm' or 'checkpoint'")

    def arm_of(record: RewardRecord) -> str | None:
        value = getattr(record, field)
        return value if value in (baseline, candidate) else None

    sides = _accumulate(records, arm_of)
    for name in (baseline, candidate):
        if name not in sides:
            raise MonitorInputError(
                f"--{'baseline' if name == baseline else 'candidate'} {name!r}: no reward records "
                f"with that {by}; check the name or use --by checkpoint")
    z = z_for_confidence(confidence)
    rows = []
    for label, metric, better in ROWS:
        s0, s1 = sides[baseline][metric], sides[candidate][metric]
        rel, lo, hi = relative_change(s0.mean, s0.variance, s0.n, s1.mean, s1.variance, s1.n, z)
        rows.append(AbRow(label, metric, better, s0.mean, s1.mean, rel, lo, hi))
    n0, n1 = int(sides[baseline]["reward"].n), int(sides[candidate]["reward"].n)
    statistic, p_value = sample_ratio_mismatch([n0, n1], list(shares))
    return AbReport(baseline, candidate, n0, n1, confidence, tuple(rows), statistic, p_value,
                    srm_alpha)


def _pct(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:+.2%}"


def format_report(report: AbReport) -> str:
    """The report as a plain-text table."""
    head = (f"A/B report: candidate {report.candidate} (n={report.n_candidate}) vs baseline "
            f"{report.baseline} (n={report.n_baseline}), {report.confidence:.0%} intervals")
    lines = [head, "",
             f"{'metric':34} {'baseline':>11} {'candidate':>11} {'change':>9}  {'interval':>21}  verdict"]
    for r in report.rows:
        interval = f"[{_pct(r.low)}, {_pct(r.high)}]"
        lines.append(f"{r.label:34} {r.baseline:11.4g} {r.candidate:11.4g} {_pct(r.relative):>9}"
                     f"  {interval:>21}  {r.verdict}")
    srm = (f"SAMPLE RATIO MISMATCH (p={report.srm_p_value:.2g} < {report.srm_alpha}): the split "
           "is off; do not trust the table until assignment is fixed"
           if report.srm_detected else
           f"sample ratio ok: chi-square {report.srm_statistic:.3f}, p={report.srm_p_value:.3g}")
    return "\n".join([*lines, "", srm])
