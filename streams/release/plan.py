"""What the release controller does next: the registry events due now. Pure.

For each model family, from the fold (``streams.release.fold``):

* **a running canary** is aborted when production changed under it (its baseline is gone) or a
  critical alert fired on its checkpoint since it started; else its A/B (the same report as
  ``ab report``: ``streams.monitors.abreport``) is judged by the sequential rule it started
  with (``streams.release.rule``): promoted or rejected (``conclude_canary``), or, while it
  keeps collecting, an interim look is recorded every ``look_interval_s`` when there is news;
* **a checkpoint that passed the gate** (status ``canary``, not started) starts its canary when
  none runs for its model and ``auto_start`` is on: the newest one, with the configured share,
  scope and rule; older ones still waiting are rejected as superseded.

Its A/B compares, from the canary's start on and within its scope, the canary's trajectories on
the ``canary`` arm with production's on ``baseline_arm``; the split's intended shares are the
canary's stated share and the rest (the gateway's configured arms are ``production`` alone).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schemas.checkpoints import (
    CanarySpec,
    CheckpointEvent,
    Registry,
    conclude_canary,
    rejection,
)
from schemas.release import CANARY_ARM, abort_canary, canary_look, live_canary, start_canary
from streams.monitors.abreport import AbReport, AbTally
from streams.release.fold import ReleaseFold
from streams.release.rule import SequentialRule, judge_look

__all__ = ["ControllerConfig", "canary_evidence", "plan"]


@dataclass(frozen=True)
class ControllerConfig:
    share: float = 0.1  # of the scope's users a new canary gets
    org: str | None = None  # the scope of a new canary: one org's users, or the fleet's
    rule: SequentialRule = field(default_factory=SequentialRule)
    auto_start: bool = True  # start a canary for each checkpoint that passes the gate
    baseline_arm: str = "production"
    look_interval_s: float = 30.0  # at most one recorded interim look per this long
    covariate_lookback_s: float = 86_400.0  # the task history a covariate averages
    actor: str = "release"

    def spec(self, checkpoint_id: str, baseline: str, now: datetime) -> CanarySpec:
        """A new canary of ``checkpoint_id`` against production ``baseline``, starting now."""
        return CanarySpec(share=self.share, org=self.org, baseline=baseline, started_at=now,
                          salt=f"canary:{checkpoint_id}", rule=self.rule.to_dict(),
                          baseline_arm=self.baseline_arm,
                          covariate_lookback_s=self.covariate_lookback_s)


def _tally(fold: ReleaseFold, event: CheckpointEvent,
           spec: CanarySpec) -> tuple[AbTally, bool]:
    """The canary's A/B so far, its sides named by checkpoint, and whether any trajectory had a
    covariate."""
    start_s = spec.started_at.timestamp()
    tally, covered = AbTally(), False
    for t in fold.since(start_s):
        if spec.org is not None and t.org_id != spec.org:
            continue
        on_canary = t.arm == CANARY_ARM and t.checkpoint_id == event.checkpoint_id
        if not on_canary and (t.arm, t.checkpoint_id) != (spec.baseline_arm, spec.baseline):
            continue
        covariate = fold.covariate(t.task, start_s, spec.covariate_lookback_s)
        covered = covered or covariate is not None
        tally.add(t.checkpoint_id, t.contributions, covariate, t.record_id)
    return tally, covered


def canary_evidence(fold: ReleaseFold, event: CheckpointEvent,
                    now: datetime) -> tuple[AbReport | None, dict[str, Any]]:
    """The running canary's report (None until both arms have trajectories) and the look's
    evidence: its decision, its reason, the rule's bounds and what a decision still needs."""
    spec = event.canary
    assert spec is not None  # a started canary
    rule = SequentialRule.from_dict(spec.rule)
    tally, covered = _tally(fold, event, spec)
    elapsed_s = max(0.0, (now - spec.started_at).total_seconds())
    n0, n1 = tally.count(spec.baseline), tally.count(event.checkpoint_id)
    if n0 == 0 or n1 == 0:
        at_most = n0 + n1 >= rule.max_trajectories or elapsed_s >= rule.max_duration_s
        missing = " and ".join(side for side, n in (("production", n0), ("canary", n1)) if not n)
        return None, {
            "decision": "reject" if at_most else "continue", "passed": False,
            "reason": f"no trajectories from the {missing} arm"
                      + (" by the maximum" if at_most else " yet"),
            "rule": rule.describe(), "parameters": rule.to_dict(), "elapsed_s": elapsed_s,
            "n_baseline": n0, "n_candidate": n1, "needed": None}
    report = tally.report(spec.baseline, event.checkpoint_id, shares=(1 - spec.share, spec.share),
                          srm_alpha=rule.srm_alpha, adjust=covered)
    look = judge_look(report, rule, elapsed_s)
    return report, look.evidence(report, rule)


def _look_due(event: CheckpointEvent, evidence: dict[str, Any], now: datetime,
              config: ControllerConfig) -> bool:
    last = event.evidence.get("ab", {}) if event.kind == "canary_look" else {}
    counts = (evidence["n_baseline"], evidence["n_candidate"])
    if counts == (0, 0):
        return False
    if last and (last.get("n_baseline"), last.get("n_candidate")) == counts:
        return False
    return event.kind != "canary_look" or \
        (now - event.occurred_at).total_seconds() >= config.look_interval_s


class _Planner:
    def __init__(self, fold: ReleaseFold, now: datetime, config: ControllerConfig) -> None:
        self.fold, self.now, self.config = fold, now, config
        self.registry = fold.registry
        self.events: list[CheckpointEvent] = []

    def emit(self, event: CheckpointEvent) -> None:
        if not self.events:  # copy on the first write: the fold's registry is the log's
            self.registry = Registry(self.registry.events)
        self.events.append(event)
        self.registry.add(event)

    def abort_reason(self, event: CheckpointEvent, spec: CanarySpec) -> tuple[str, dict] | None:
        production = self.registry.production(event.model)
        if production is None or production.checkpoint_id != spec.baseline:
            now_serving = production.checkpoint_id if production else "the base model"
            return (f"production changed during the canary ({spec.baseline} → {now_serving}): "
                    "its baseline is gone", {})
        start_s = spec.started_at.timestamp()
        for alert in self.fold.alerts:
            if alert.labels.get("checkpoint") == event.checkpoint_id and alert.fired_s >= start_s:
                return (f"critical alert on the canary: {alert.title}: {alert.summary}",
                        {"alert": {"fingerprint": alert.fingerprint, "labels": alert.labels,
                                   "title": alert.title, "summary": alert.summary}})
        return None

    def decide(self, event: CheckpointEvent) -> None:
        spec = event.canary
        assert spec is not None
        aborted = self.abort_reason(event, spec)
        if aborted is not None:
            reason, detail = aborted
            self.emit(abort_canary(self.registry, event.checkpoint_id, self.now,
                                   self.config.actor, reason, detail))
            return
        _, evidence = canary_evidence(self.fold, event, self.now)
        if evidence["decision"] in ("promote", "reject"):
            self.emit(conclude_canary(self.registry, event.checkpoint_id, self.now,
                                      self.config.actor, evidence))
        elif _look_due(event, evidence, self.now, self.config):
            self.emit(canary_look(self.registry, event.checkpoint_id, self.now,
                                  self.config.actor, evidence))

    def start(self, model: str) -> None:
        waiting = [e for e in self.registry.by_status("canary", model) if e.canary is None]
        production = self.registry.production(model)
        if not waiting or production is None:
            return
        newest, older = waiting[0], waiting[1:]
        spec = self.config.spec(newest.checkpoint_id, production.checkpoint_id, self.now)
        self.emit(start_canary(self.registry, newest.checkpoint_id, self.now,
                               self.config.actor, spec))
        for stale in older:
            self.emit(rejection(self.registry, stale.checkpoint_id, self.now, self.config.actor,
                                {**stale.evidence, "ab": {
                                    "passed": False, "decision": "reject",
                                    "reason": f"superseded by {newest.checkpoint_id} before "
                                              "its canary started"}}))


def plan(fold: ReleaseFold, now: datetime, config: ControllerConfig) -> list[CheckpointEvent]:
    """The registry events due at ``now`` (see the module docstring)."""
    planner = _Planner(fold, now, config)
    models = sorted({e.model for e in fold.registry.latest.values() if e.status == "canary"})
    for model in models:
        running = live_canary(planner.registry, model)
        if running is not None:
            planner.decide(running)
        if config.auto_start and live_canary(planner.registry, model) is None:
            planner.start(model)
    return planner.events
