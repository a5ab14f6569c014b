"""One card per problem: an alert's org and fleet scopes grouped, episodes kept apart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from serving.console.problems import problem_views

T0 = datetime(2026, 1, 5, 14, 0, tzinfo=UTC)


def _view(org: str, *, detector: str = "edit_rate_collapse", checkpoint: str = "c1",
          started_min: int = 0, resolved_min: int | None = None, status: str = "firing",
          silenced: bool = False, severity: str = "critical",
          rollback: bool = True) -> dict[str, Any]:
    resolved = None if resolved_min is None else (T0 + timedelta(minutes=resolved_min))
    return {
        "fingerprint": f"{detector}-{checkpoint}-{org}-{started_min}", "detector": detector,
        "title": detector.replace("_", " "), "severity": severity, "runbook": "look",
        "labels": {"alertname": detector, "checkpoint": checkpoint, "arm": "default",
                   "org": org, "severity": severity},
        "status": "resolved" if resolved is not None else status,
        "started_at": (T0 + timedelta(minutes=started_min)).isoformat(),
        "resolved_at": resolved.isoformat() if resolved else None,
        "silenced_by": {"silence_id": "s"} if silenced else None,
        "rollback_offered": rollback,
    }


def test_an_org_and_the_fleet_alert_of_one_drift_are_one_problem() -> None:
    fleet, acme = _view("*", started_min=2), _view("acme", started_min=0, status="acknowledged")
    [problem] = problem_views([fleet, acme])
    assert problem["orgs"] == ["acme", "*"]  # orgs first, the fleet last
    assert [s["fingerprint"] for s in problem["scopes"]] == [acme["fingerprint"],
                                                             fleet["fingerprint"]]
    assert problem["id"] == acme["fingerprint"] and problem["state"] == "firing"
    assert problem["started_at"] == acme["started_at"]
    assert "org" not in problem["labels"] and problem["labels"]["checkpoint"] == "c1"


def test_different_conditions_stay_apart() -> None:
    views = [_view("acme"), _view("*", checkpoint="c2"), _view("*", detector="broken_call_spike"),
             _view("beta")]
    problems = problem_views(views)
    assert sorted(p["orgs"] for p in problems) == [["*"], ["*"], ["acme", "beta"]]


def test_alerts_of_one_condition_that_were_never_open_together_are_separate_episodes() -> None:
    earlier = _view("acme", started_min=0, resolved_min=10)
    later = _view("*", started_min=30)
    overlapping = _view("beta", started_min=5, resolved_min=40)
    assert [p["orgs"] for p in problem_views([earlier, later])] == [["*"], ["acme"]]
    [joined] = problem_views([earlier, later, overlapping])  # beta bridges the gap
    assert joined["orgs"] == ["acme", "beta", "*"]


def test_state_is_the_most_urgent_scope_and_problems_sort_by_it() -> None:
    silenced = problem_views([_view("acme", silenced=True), _view("*", status="acknowledged")])
    assert silenced[0]["state"] == "silenced"
    done = _view("acme", detector="latency_regression", resolved_min=3, severity="warning")
    warning = _view("acme", detector="clarification_spike", severity="warning")
    critical = _view("acme", started_min=9)
    assert [p["detector"] for p in problem_views([done, warning, critical])] == [
        "edit_rate_collapse", "clarification_spike", "latency_regression"]
    assert problem_views([done])[0]["state"] == "resolved"


def test_roll_back_is_offered_when_a_scope_may_roll_the_checkpoint_back() -> None:
    assert problem_views([_view("acme", rollback=False)])[0]["rollback_offered"] is False
    assert problem_views([_view("acme", rollback=False), _view("*")])[0]["rollback_offered"]
