"""One card per problem: the alerts of one condition raised for several scopes, grouped (pure).

The detectors test each org's windows and the fleet's (org ``*``) apart, so one drift raises an
alert per scope, each with its own fingerprint. Those alerts are one problem when they share
the detector and every label but the org (checkpoint, arm, and any the detector adds), and
were open at the same time: alerts of one condition whose lifetimes (fired → resolved) do not
overlap are separate episodes. A problem lists its scopes, orgs first and the fleet last; its
state is the most urgent of theirs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

__all__ = ["problem_views"]

_URGENCY = ("firing", "silenced", "acknowledged", "resolved")
_FLEET = "*"


def _condition(view: dict[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
    labels = view["labels"]
    return view["detector"], tuple(sorted((k, v) for k, v in labels.items() if k != "org"))


def _state(view: dict[str, Any]) -> str:
    return "silenced" if view["silenced_by"] and view["status"] != "resolved" else view["status"]


def _at(iso: str | None) -> datetime | None:
    return None if iso is None else datetime.fromisoformat(iso)


def _episodes(views: list[dict[str, Any]]) -> Iterable[list[dict[str, Any]]]:
    """Views of one condition split where no alert was open: overlapping lifetimes join."""
    episode: list[dict[str, Any]] = []
    ends: datetime | None = None  # the episode's latest resolution; None while one is open
    for view in sorted(views, key=lambda v: datetime.fromisoformat(v["started_at"])):
        started, resolved = datetime.fromisoformat(view["started_at"]), _at(view["resolved_at"])
        if episode and ends is not None and started > ends:
            yield episode
            episode = []
        if not episode:
            ends = resolved
        elif ends is not None:
            ends = None if resolved is None else max(ends, resolved)
        episode.append(view)
    if episode:
        yield episode


def _problem(scopes: list[dict[str, Any]]) -> dict[str, Any]:
    scopes = sorted(scopes, key=lambda v: (v["labels"].get("org") == _FLEET,
                                           v["labels"].get("org", "")))
    first = scopes[0]
    state = min((_state(v) for v in scopes), key=_URGENCY.index)
    return {
        "id": first["fingerprint"], "detector": first["detector"], "title": first["title"],
        "severity": first["severity"], "state": state,
        "labels": {k: v for k, v in first["labels"].items() if k != "org"},
        "orgs": [v["labels"].get("org", _FLEET) for v in scopes],
        "started_at": min((v["started_at"] for v in scopes), key=datetime.fromisoformat),
        "runbook": first["runbook"],
        "rollback_offered": any(v.get("rollback_offered") for v in scopes),
        "scopes": scopes,
    }


def problem_views(views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The alert views (``ConsoleState.alert_views``) as problems: the most urgent first, then
    critical before the rest, then the oldest first."""
    by_condition: dict[tuple[str, tuple[tuple[str, str], ...]], list[dict[str, Any]]] = \
        defaultdict(list)
    for view in views:
        by_condition[_condition(view)].append(view)
    problems = [_problem(episode) for condition in by_condition.values()
                for episode in _episodes(condition)]
    return sorted(problems, key=lambda p: (_URGENCY.index(p["state"]),
                                           p["severity"] != "critical",
                                           datetime.fromisoformat(p["started_at"])))
