"""Gate statistics: paired per-task differences and a cluster-bootstrap non-inferiority test.

Candidate and incumbent are scored on the same tasks with the same seed, so each task gives one
paired difference ``d = candidate - incumbent``. Tasks are not independent when several draw from
one source (``fix-add#0``, ``fix-add#1`` share the cluster ``fix-add``), so the interval resamples
whole clusters: a naive task-level bootstrap on clustered data is far too confident. A family
passes when the lower end of its interval for mean(d) is above ``-margin``; the overall check
resamples families as clusters. A family with a single cluster has no estimate of spread, so its
interval collapses to its mean.

A candidate can also pass on solve rate while it breaks more tool calls (a call the sandbox cannot
run), which is the regression a canary would otherwise catch in production. The broken-call
guardrail compares the share of tasks with a broken call, paired per task with families as
clusters, and fails only when the lower end of the difference's interval is above a tolerance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from schemas.evals import TaskResult

__all__ = [
    "FamilyVerdict", "GateVerdict", "GuardrailVerdict", "PairedDiff", "broken_call_guardrail",
    "cluster_bootstrap_interval", "cluster_of", "gate_verdict", "pair_results",
]


@dataclass(frozen=True)
class PairedDiff:
    task_id: str
    family: str
    cluster: str
    candidate: float
    incumbent: float
    candidate_broke: bool = False  # the task's episode had at least one broken tool call
    incumbent_broke: bool = False

    @property
    def diff(self) -> float:
        return self.candidate - self.incumbent


@dataclass(frozen=True)
class FamilyVerdict:
    family: str
    tasks: int
    clusters: int
    mean_diff: float
    lower: float
    upper: float
    passed: bool


@dataclass(frozen=True)
class GuardrailVerdict:
    """Share of tasks with a broken tool call, candidate against incumbent."""
    candidate_share: float
    incumbent_share: float
    mean_diff: float
    lower: float
    upper: float
    tolerance: float
    passed: bool


@dataclass(frozen=True)
class GateVerdict:
    passed: bool
    margin: float
    confidence: float
    families: tuple[FamilyVerdict, ...]
    overall: FamilyVerdict
    guardrail: GuardrailVerdict

    def evidence(self) -> dict[str, object]:
        return {
            "passed": self.passed, "margin": self.margin, "confidence": self.confidence,
            "overall": asdict(self.overall), "families": [asdict(f) for f in self.families],
            "guardrail": asdict(self.guardrail),
        }


def cluster_of(task_id: str) -> str:
    """Repeated draws of one task share a cluster: ``name#k`` belongs to ``name``."""
    return task_id.split("#", 1)[0]


def pair_results(candidate: Sequence[TaskResult],
                 incumbent: Sequence[TaskResult]) -> list[PairedDiff]:
    """Pair results by task id; both runs must have scored exactly the same tasks."""
    cand = {r.task_id: r for r in candidate}
    inc = {r.task_id: r for r in incumbent}
    if cand.keys() != inc.keys():
        missing = sorted(cand.keys() ^ inc.keys())[:5]
        raise ValueError(f"candidate and incumbent scored different tasks, e.g. {missing}")
    return [PairedDiff(t, cand[t].family, cluster_of(t), cand[t].score, inc[t].score,
                       cand[t].broken_calls > 0, inc[t].broken_calls > 0)
            for t in sorted(cand)]


def cluster_bootstrap_interval(
    diffs: Sequence[float], clusters: Sequence[str], confidence: float, resamples: int, seed: int
) -> tuple[float, float]:
    """Percentile interval of the task-weighted mean of ``diffs``, resampling whole clusters."""
    names = sorted(set(clusters))
    index = {name: i for i, name in enumerate(names)}
    sums = np.zeros(len(names))  # (K,)
    counts = np.zeros(len(names))  # (K,)
    for d, c in zip(diffs, clusters, strict=False):
        sums[index[c]] += d
        counts[index[c]] += 1
    rng = np.random.Generator(np.random.PCG64(seed))
    draws = rng.integers(0, len(names), size=(resamples, len(names)))  # (R, K)
    means = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)  # (R,)
    alpha = 1.0 - confidence
    lower, upper = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(lower), float(upper)


def _verdict(name: str, pairs: Sequence[PairedDiff], clusters: Sequence[str], margin: float,
             confidence: float, resamples: int, seed: int) -> FamilyVerdict:
    diffs = [p.diff for p in pairs]
    lower, upper = cluster_bootstrap_interval(diffs, clusters, confidence, resamples, seed)
    return FamilyVerdict(name, len(pairs), len(set(clusters)), float(np.mean(diffs)), lower,
                         upper, lower > -margin)


def broken_call_guardrail(pairs: Sequence[PairedDiff], tolerance: float, confidence: float,
                          resamples: int, seed: int) -> GuardrailVerdict:
    """Fail when the candidate's share of tasks with a broken call is surely above the
    incumbent's by more than ``tolerance`` (the interval's lower end, families as clusters)."""
    candidate = [float(p.candidate_broke) for p in pairs]
    incumbent = [float(p.incumbent_broke) for p in pairs]
    diffs = [c - i for c, i in zip(candidate, incumbent, strict=True)]
    lower, upper = cluster_bootstrap_interval(diffs, [p.family for p in pairs], confidence,
                                              resamples, seed)
    return GuardrailVerdict(float(np.mean(candidate)), float(np.mean(incumbent)),
                            float(np.mean(diffs)), lower, upper, tolerance, lower <= tolerance)


def gate_verdict(pairs: Sequence[PairedDiff], margin: float, broken_call_tolerance: float,
                 confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> GateVerdict:
    """Pass when every family, and all tasks with families as clusters, is non-inferior on
    score, and the candidate does not surely break more tool calls than the tolerance allows."""
    if not pairs:
        raise ValueError("the gate needs at least one paired task result")
    families = []
    for family in sorted({p.family for p in pairs}):
        mine = [p for p in pairs if p.family == family]
        families.append(_verdict(family, mine, [p.cluster for p in mine], margin, confidence,
                                 resamples, seed))
    overall = _verdict("*", pairs, [p.family for p in pairs], margin, confidence, resamples, seed)
    guardrail = broken_call_guardrail(pairs, broken_call_tolerance, confidence, resamples, seed)
    passed = overall.passed and all(f.passed for f in families) and guardrail.passed
    return GateVerdict(passed, margin, confidence, tuple(families), overall, guardrail)
