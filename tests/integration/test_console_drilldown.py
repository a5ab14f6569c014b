"""The console's JSON API for on-call against the real broker (``console_seed``): an alert's org
and fleet scopes as one problem; from an alert to the trajectories in its window, with their
events, reward components and completions, a page at a time, never another org's; Roll back
offered only for a checkpoint the platform serves."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from infra.settings import Settings
from infra.topics import create_topics
from serving.console.app import create_app
from serving.console.auth import StaffAuth
from serving.console.state import ConsoleState
from tests.support.console_seed import SERVED_ELSEWHERE, Seeded, seed_console
from tests.support.service_keys import staff_keys
from tests.support.waits import wait_for

pytestmark = pytest.mark.kafka
FLEET = {"X-Staff-Key": "fleet-key"}
ACME = {"X-Staff-Key": "acme-key"}
SPIKE = "broken_call_spike"


@pytest.fixture(scope="module")
def topics(kafka_settings: Settings) -> Settings:
    """One prefix for the module: its tests only read what ``seeded`` wrote."""
    settings = replace(kafka_settings, topic_prefix=f"t{uuid.uuid4().hex[:10]}.")
    create_topics(settings)
    return settings


@pytest.fixture(scope="module")
def seeded(topics: Settings) -> Seeded:
    return seed_console(topics)


@pytest.fixture(scope="module")
def console(topics: Settings, seeded: Seeded) -> Iterator[TestClient]:
    keys = StaffAuth(staff_keys({"fleet-key": ("fleet", ["*"]), "acme-key": ("ann", ["acme"])}))
    with TestClient(create_app(ConsoleState(topics), keys)) as client:
        wait_for(lambda: len(client.get("/api/alerts", headers=FLEET).json()["alerts"]) == 5
                 and client.get("/api/series?metric=edit_rate", headers=FLEET).json()["series"],
                 60, "the console to fold the alerts and windows")
        yield client


def _trajectories(console: TestClient, fingerprint: str, headers: dict[str, str],
                  **params: Any) -> dict[str, Any]:
    answer = console.get(f"/api/alerts/{fingerprint}/trajectories", params=params,
                         headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_an_alert_of_one_drift_for_orgs_and_the_fleet_is_one_problem(
        console: TestClient, seeded: Seeded) -> None:
    problems = console.get("/api/alerts", headers=FLEET).json()["problems"]
    spike = [p for p in problems if p["detector"] == SPIKE]
    assert len(spike) == 1 and spike[0]["orgs"] == ["acme", "evil", "*"]
    assert {s["fingerprint"] for s in spike[0]["scopes"]} == {
        seeded.fingerprint(SPIKE, org) for org in ("acme", "evil", "*")}
    latency = [p for p in problems if p["labels"]["checkpoint"] == SERVED_ELSEWHERE]
    assert len(latency) == 1 and latency[0]["orgs"] == ["acme", "*"]
    assert len(problems) == 2
    # ann sees acme's alerts only: each problem with acme's one scope
    mine = console.get("/api/alerts", headers=ACME).json()["problems"]
    assert sorted(p["orgs"] for p in mine) == [["acme"], ["acme"]]


def test_the_drilldown_gives_the_windows_trajectories_with_events_components_and_completions(
        console: TestClient, seeded: Seeded) -> None:
    page = _trajectories(console, seeded.fingerprint(SPIKE, "acme"), ACME)
    assert page["scope"] == {"org": "acme", "checkpoint": "c1", "arm": "*"}  # arms pooled
    assert (page["window"]["since"], page["window"]["until"]) == (
        seeded.since.isoformat(), seeded.until.isoformat())
    assert [t["trajectory_id"] for t in page["trajectories"]] == seeded.behind
    assert page["next"] is None  # the whole window fitted in the page
    for trajectory in page["trajectories"]:
        assert trajectory["org"] == "acme" and trajectory["checkpoint"] == "c1"
        assert trajectory["events_found"] == trajectory["events_folded"] == 10
        types = [e["type"] for e in trajectory["events"]]
        assert types[0] == "completion.served" and types.count("tool.called") == 2
        assert "trajectory.ended" in types and "edit.persistence" in types
        broken = [e for e in trajectory["events"] if e["type"] == "tool.called"
                  and not e["payload"]["valid"]]
        assert broken[0]["payload"]["error_kind"] == "malformed_call"
        reward = trajectory["reward"]
        assert reward["components"]["broken_tool_calls"] < 0
        assert reward["total"] == pytest.approx(sum(reward["components"].values()))
        completions = trajectory["completions"]
        assert [c["completion_id"] for c in completions] == [
            f"{trajectory['trajectory_id']}-c0", f"{trajectory['trajectory_id']}-c1"]
        assert completions[0]["model"] == "agent-model" and completions[0]["in_sample"]
        assert completions[0]["completion_token_count"] == 24  # token ids become counts
        assert "completion_token_ids" not in completions[0]
        assert completions[1]["finish_reason"] == "stop" and completions[1]["latency_ms"] > 0
        # the samples view's part: turns, each one's credit (they add up to the total), and
        # what users did with its work (the edit and the broken call came after the first)
        assert [c["turn"] for c in completions] == [0, 1]
        assert sum(c["credit"] for c in completions) == pytest.approx(reward["total"])
        assert completions[0]["labels"]["edits_accepted"] == 1
        assert [call["valid"] for call in completions[0]["tools_called"]] == [True, False]


def test_pages_follow_the_cursor_to_the_end(console: TestClient, seeded: Seeded) -> None:
    fingerprint, seen = seeded.fingerprint(SPIKE, "acme"), []
    page = _trajectories(console, fingerprint, ACME, limit=2)
    pages = 1
    while True:
        assert len(page["trajectories"]) <= 2
        seen += [t["trajectory_id"] for t in page["trajectories"]]
        if page["next"] is None:
            break
        page = _trajectories(console, fingerprint, ACME, limit=2, cursor=page["next"])
        pages += 1
    assert sorted(seen) == sorted(seeded.behind) and pages >= 2
    for bad in ("not-a-cursor", "eyJ4IjotMX0", "A" * 9000):
        refused = console.get(f"/api/alerts/{fingerprint}/trajectories",
                              params={"cursor": bad}, headers=ACME)
        assert refused.status_code == 422 and "cursor" in refused.json()["detail"]
    assert console.get(f"/api/alerts/{fingerprint}/trajectories", params={"limit": 51},
                       headers=ACME).status_code == 422


def test_no_org_reads_another_orgs_trajectories(console: TestClient, seeded: Seeded) -> None:
    """evil's copy of acme's first trajectory (same trajectory and event ids) never shows under
    acme's alert; ann, who sees acme only, cannot read evil's or the fleet's alert at all."""
    acme = _trajectories(console, seeded.fingerprint(SPIKE, "acme"), FLEET)
    shown = [t for t in acme["trajectories"] if t["trajectory_id"] == seeded.copied]
    assert len(shown) == 1 and shown[0]["org"] == "acme"
    models = {c.get("model") for t in acme["trajectories"] for c in t["completions"]}
    assert models == {"agent-model"}  # none of evil's completions
    evil = _trajectories(console, seeded.fingerprint(SPIKE, "evil"), FLEET)
    assert [(t["org"], t["trajectory_id"]) for t in evil["trajectories"]] == [
        ("evil", seeded.copied)]
    assert {c["model"] for c in evil["trajectories"][0]["completions"]} == {"evil-model"}
    fleet = _trajectories(console, seeded.fingerprint(SPIKE, "*"), FLEET)
    assert sorted((t["org"], t["trajectory_id"]) for t in fleet["trajectories"]) == sorted(
        [("acme", name) for name in seeded.behind] + [("evil", seeded.copied)])

    unknown = console.get("/api/alerts/0000000000000000/trajectories", headers=ACME)
    assert unknown.status_code == 404
    for org in ("evil", "*"):
        fingerprint = seeded.fingerprint(SPIKE, org)
        refused = console.get(f"/api/alerts/{fingerprint}/trajectories", headers=ACME)
        assert refused.status_code == 404
        assert refused.json()["detail"].replace(fingerprint, "X") == \
            unknown.json()["detail"].replace("0000000000000000", "X")  # as if it did not exist


def test_roll_back_is_offered_only_for_a_checkpoint_the_platform_serves(
        console: TestClient) -> None:
    offered = {(v["labels"]["checkpoint"], v["labels"]["org"]): v["rollback_offered"]
               for v in console.get("/api/alerts", headers=FLEET).json()["alerts"]}
    assert offered == {("c1", "acme"): True, ("c1", "evil"): True, ("c1", "*"): True,
                       (SERVED_ELSEWHERE, "acme"): False, (SERVED_ELSEWHERE, "*"): False}
    # ann may not roll back c1, whose lineage names no org: it is not offered to her either
    assert not any(p["rollback_offered"] for p in
                   console.get("/api/alerts", headers=ACME).json()["problems"])
    units = console.get("/api/metrics", headers=ACME).json()["units"]
    assert (units["edit_rate"], units["latency_p95_ms"], units["reward"]) == (
        "share", "ms", "value")
