"""The canary's A/B in the demo: a cycle's reward records of the production and the canary
checkpoint → the A/B report and its rule (``streams.monitors.abreport``, ``abrule``) → the
evidence the trainer concludes the canary with (``TrainingCycle.conclude_canary``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.demo.config import DemoConfig
from schemas.rewards import RewardRecord
from streams.monitors.abreport import AbReport, build_report
from streams.monitors.abrule import AbRule, AbVerdict, judge_ab

__all__ = ["judge_canary"]


def judge_canary(records: Sequence[RewardRecord], production: str, canary: str,
                 config: DemoConfig, covariates: Mapping[str, float] | None = None,
                 ) -> tuple[AbReport | None, AbVerdict, dict[str, Any]]:
    """The report (None when an arm has no records), the verdict, and the verdict's evidence;
    ``covariates`` (trajectory id → the same task's reward in the previous cycle) adjust the
    reward's difference."""
    rule = AbRule(margin=config.ab_margin)
    present = {record.checkpoint_id for record in records}
    missing = [arm for arm, checkpoint in (("production", production), ("canary", canary))
               if checkpoint not in present]
    if missing:
        verdict = AbVerdict(False, f"no reward records from the {' and '.join(missing)} arm: "
                                   "nothing to compare")
        return None, verdict, {"passed": False, "reason": verdict.reason,
                               "rule": rule.describe()}
    report = build_report(records, production, canary, by="checkpoint",
                          shares=(1 - config.canary_share, config.canary_share),
                          covariates=covariates)
    verdict = judge_ab(report, rule)
    return report, verdict, verdict.evidence(report, rule)
