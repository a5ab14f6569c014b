"""The console's view of the release loop on the real broker: the running canary's table, the
rule's state and what a decision still needs; which checkpoints the platform serves."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from infra.kafka_io import make_producer, send
from infra.settings import Settings
from schemas.checkpoints import CheckpointEvent, enter_canary
from schemas.release import external_registration
from schemas.rewards import RewardRecord, Sample
from serving.console.app import create_app
from serving.console.auth import StaffAuth
from serving.console.state import ConsoleState
from streams.release.fold import ReleaseFold
from streams.release.plan import ControllerConfig, plan
from tests.support.service_keys import staff_keys
from tests.support.waits import wait_for

pytestmark = pytest.mark.kafka
FLEET_KEY = {"X-Staff-Key": "ana-secret-key"}
ACME_KEY = {"X-Staff-Key": "carol-secret-key"}


def _canary_with_a_look(start: datetime) -> list[CheckpointEvent]:
    """base in production, c1 gated, its canary started and looked at once (undecided)."""
    fold = ReleaseFold()
    fold.add_checkpoint(CheckpointEvent(
        event_id="e1", sequence=1, occurred_at=start, kind="promoted", status="production",
        checkpoint_id="base", model="m", path="/models/base"))
    fold.add_checkpoint(CheckpointEvent(
        event_id="e2", sequence=2, occurred_at=start, kind="created", status="candidate",
        checkpoint_id="c1", model="m", path="/ck/c1", adapter=True, orgs=["acme"]))
    fold.add_checkpoint(enter_canary(fold.registry, "c1", start, "gate", {"passed": True}))
    config = ControllerConfig(share=0.5)
    for event in plan(fold, start, config):
        fold.add_checkpoint(event)
    rng = random.Random(1)
    for i in range(120):
        canary = i % 2 == 0
        at = start + timedelta(seconds=i + 1)
        sample = Sample(completion_id=f"c{i}", checkpoint_id="c1" if canary else "base",
                        prompt_token_ids=[i % 7], completion_token_ids=[1],
                        behaviour_logprobs=[-1.0])
        reward = rng.gauss(0.0, 1.0)
        fold.add_reward(RewardRecord(
            trajectory_id=f"t{i}", spec_version="v", checkpoint_id=sample.checkpoint_id,
            arm="canary" if canary else "production", org_id="acme", outcome="completed",
            ended_at=at, finalized_by="complete", finalized_at=at, samples=[sample],
            components={"x": reward}, total=reward, signals={}, event_ids=[]))
    for event in plan(fold, start + timedelta(minutes=3), config):
        fold.add_checkpoint(event)
    external = external_registration(fold.registry, "teamx-agent-7", "m", start, "ops")
    return [*fold.registry.history, external]


def test_the_console_shows_the_running_canary_and_what_the_platform_serves(
    kafka: Settings,
) -> None:
    events = _canary_with_a_look(datetime.now(UTC) - timedelta(minutes=5))
    assert [e.kind for e in events][-2:] == ["canary_look", "registered"]
    producer = make_producer(kafka, "test")
    for event in events:
        send(producer, kafka, "checkpoints", event.checkpoint_id.encode(),
             event.model_dump_json().encode())
    producer.close()
    keys = StaffAuth(staff_keys({"ana-secret-key": ("ana", ["*"]),
                                 "carol-secret-key": ("carol", ["acme"])}))
    with TestClient(create_app(ConsoleState(kafka), keys)) as client:
        wait_for(lambda: len(client.get("/api/checkpoints", headers=FLEET_KEY)
                             .json()["checkpoints"]) == len(events), 30,
                 "the console to fold the registry")
        [canary] = client.get("/api/canaries", headers=FLEET_KEY).json()["canaries"]
        assert canary["checkpoint_id"] == "c1" and canary["canary"]["share"] == 0.5
        look = canary["look"]
        assert look["decision"] == "continue" and look["needed"] > 0
        assert look["n_baseline"] + look["n_candidate"] == 120
        assert [row["metric"] for row in look["rows"]][-1] == "reward"
        assert look["primary_bound"]["low"] < -0.15 < look["primary_bound"]["high"]
        # A fleet canary's A/B is of every org's traffic: not shown to one org's staff.
        assert client.get("/api/canaries", headers=ACME_KEY).json()["canaries"] == []

        views = client.get("/api/checkpoints", headers=FLEET_KEY).json()["checkpoints"]
        served = {v["checkpoint_id"]: v["served_by_platform"] for v in views}
        assert served == {"base": True, "c1": True, "teamx-agent-7": False}
        refused = client.post("/api/checkpoints/teamx-agent-7/rollback",
                              json={"reason": "edit rate collapse"}, headers=FLEET_KEY)
        assert refused.status_code == 409 and "outside the platform" in refused.json()["detail"]
        assert client.post("/api/session", json={"key": "ana-secret-key"}).status_code == 200
        assert '<h2>Canary</h2><div id="canary">' in client.get("/").text
