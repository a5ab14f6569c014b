"""The gate: score candidate and incumbent on the same suite and seed, decide non-inferiority
and the broken-call guardrail."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.evals import EvalSuite, TaskResult
from trainer.bootstrap import GateVerdict, gate_verdict, pair_results

__all__ = ["Gate", "GateOutcome", "describe_gate", "failed_checks"]


@dataclass(frozen=True)
class GateOutcome:
    verdict: GateVerdict
    candidate_mean: float
    incumbent_mean: float

    def evidence(self, candidate_id: str, incumbent_id: str, seed: int) -> dict[str, Any]:
        return {"candidate": candidate_id, "incumbent": incumbent_id, "seed": seed,
                "candidate_mean": self.candidate_mean, "incumbent_mean": self.incumbent_mean,
                **self.verdict.evidence()}


class Gate:
    """Runs the suite; the incumbent's results are cached per checkpoint and seed."""

    def __init__(self, suite: EvalSuite, margin: float, broken_call_tolerance: float,
                 confidence: float, resamples: int, seed: int) -> None:
        self.suite = suite
        self.margin = margin
        self.broken_call_tolerance = broken_call_tolerance
        self.confidence = confidence
        self.resamples = resamples
        self.seed = seed
        self._cache: dict[tuple[str, int], list[TaskResult]] = {}

    def _results(self, checkpoint_id: str, directory: Path) -> list[TaskResult]:
        key = (checkpoint_id, self.seed)
        if key not in self._cache:
            self._cache[key] = self.suite.evaluate(directory, self.seed)
        return self._cache[key]

    def judge(self, candidate: tuple[str, Path], incumbent: tuple[str, Path]) -> GateOutcome:
        cand = self._results(*candidate)
        inc = self._results(*incumbent)
        pairs = pair_results(cand, inc)
        verdict = gate_verdict(pairs, self.margin, self.broken_call_tolerance, self.confidence,
                               self.resamples, self.seed)
        return GateOutcome(verdict, sum(r.score for r in cand) / len(cand),
                           sum(r.score for r in inc) / len(inc))


def _family_line(family: Mapping[str, Any]) -> str:
    name = "all families" if family["family"] == "*" else family["family"]
    return (f"{name} {family['mean_diff']:+.3f} "
            f"[{family['lower']:+.3f}, {family['upper']:+.3f}]")


def _failed(evidence: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    failed = [f for f in evidence.get("families", []) if not f["passed"]]
    overall = evidence.get("overall", {})
    if overall and not overall.get("passed", True):
        failed.append(overall)
    return failed


def _guardrail_failed(evidence: Mapping[str, Any]) -> bool:
    return not evidence.get("guardrail", {}).get("passed", True)


def _guardrail_line(guardrail: Mapping[str, Any]) -> str:
    return (f"tasks with a broken call {guardrail['incumbent_share']:.2f} → "
            f"{guardrail['candidate_share']:.2f} ({guardrail['mean_diff']:+.3f} "
            f"[{guardrail['lower']:+.3f}, {guardrail['upper']:+.3f}])")


def failed_checks(evidence: Mapping[str, Any]) -> list[str]:
    """What a gate failed on: families ("all families" for the overall check), "broken calls"."""
    failed = ["all families" if f["family"] == "*" else f["family"] for f in _failed(evidence)]
    return failed + (["broken calls"] if _guardrail_failed(evidence) else [])


def describe_gate(evidence: Mapping[str, Any]) -> str:
    """One line from a gate's evidence: a pass with its overall change and interval, or each
    check that failed: a family with its change, interval and the margin its lower bound fell
    below; the broken-call guardrail with both shares, the change, interval and tolerance."""
    margin = evidence.get("margin")
    guardrail = evidence.get("guardrail")
    if evidence.get("passed"):
        tail = f"; {_guardrail_line(guardrail)}" if guardrail else ""
        return (f"gate pass: {_family_line(evidence.get('overall', {}))}; every family's lower "
                f"bound above -{margin:g}{tail}")
    reasons = []
    if families := _failed(evidence):
        reasons.append(f"{'; '.join(map(_family_line, families))}: lower bound at or below the "
                       f"margin -{margin:g}")
    if guardrail and _guardrail_failed(evidence):
        reasons.append(f"{_guardrail_line(guardrail)}: lower bound above the tolerance "
                       f"{guardrail['tolerance']:+g}")
    return f"gate fail: {'; '.join(reasons) or 'no family recorded'}"
