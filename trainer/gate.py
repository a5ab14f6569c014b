"""The gate: score candidate and incumbent on the same suite and seed, decide non-inferiority."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.evals import EvalSuite, TaskResult
from trainer.bootstrap import GateVerdict, non_inferiority, pair_results

__all__ = ["Gate", "GateOutcome"]


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

    def __init__(self, suite: EvalSuite, margin: float, confidence: float, resamples: int,
                 seed: int) -> None:
        self.suite = suite
        self.margin = margin
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
        verdict = non_inferiority(pairs, self.margin, self.confidence, self.resamples, self.seed)
        return GateOutcome(verdict, sum(r.score for r in cand) / len(cand),
                           sum(r.score for r in inc) / len(inc))
