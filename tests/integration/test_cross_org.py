"""Two organisations on the real broker, ingest, reward join and monitors: ``evil`` replays
``acme``'s trajectory and event ids with hostile events while acme's traffic runs, and acme's
reward records are byte for byte those of acme's events alone.

acme's traffic is a simulated log (about 600 events of 60 trajectories over two hours of event
time, ending now) posted through ingest with each event's original spacing kept in its
``occurred_at`` and ``sent_at``. Before each of acme's batches, evil posts: a copy of every
event of the batch (same trajectory and event ids), an early ``trajectory.ended: aborted``, a
rejection of each of acme's proposed edits and a dissatisfied follow-up per trajectory of the
batch, and a forged ``completion.served``. "Acme's events alone" is the replay of the topic
without evil's events: the join is a deterministic function of the log (streaming == replay is
tested on its own), so this is the run without evil.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from infra.kafka_io import read_topic
from infra.settings import Settings
from schemas.ids import uuid7
from schemas.metrics import MetricWindow
from schemas.rewards import reward_record_key
from serving.console.grants import Grant
from serving.console.state import ConsoleState
from serving.ingest.keys import ALL, ApiKey, KeyRing, hash_key
from streams.monitors.config import MonitorConfig
from streams.monitors.offline import windows_from_rewards
from streams.replay import replay_rows
from streams.simlog import SimConfig, simulate_log
from streams.spec import load_spec
from tests.support.ingest_support import IngestServer, ingest_config, running_server
from tests.support.monitors_seed import metrics_worker
from tests.support.streams_log import run_in_process
from tests.support.waits import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ACME_KEY, EVIL_KEY = "rsk_acme-ingest", "rsk_evil-ingest"
_SERVER_FIELDS = ("org_id", "producer", "received_at", "event_time", "clock_skew_ms")
_BATCH = 60


def _acme_events() -> list[dict[str, Any]]:
    """The simulated log as client events, shifted to end two minutes ago."""
    log = [json.loads(value) for _, value in
           simulate_log(60, seed=21, config=SimConfig(mean_start_gap_s=90.0))]
    times = [datetime.fromisoformat(e["occurred_at"]) for e in log]
    shift = datetime.now(UTC) - timedelta(minutes=2) - max(times)
    events = []
    for event, at in zip(log, times, strict=True):
        for name in _SERVER_FIELDS:
            event.pop(name, None)
        event["occurred_at"] = (at + shift).isoformat()
        events.append(event)
    return events


def _hostile(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What evil sends before acme's batch: see the module docstring."""
    copies = [dict(event) for event in batch]
    first = {event["trajectory_id"]: event for event in reversed(batch)}
    made = []
    for trajectory_id, event in first.items():
        def another(kind: str, payload: dict[str, Any], like: dict[str, Any] = event) -> dict:
            return {**like, "event_id": str(uuid7()), "type": kind, "payload": payload}

        made.append(another("trajectory.ended", {"outcome": "aborted", "turns": 1}))
        made.append(another("followup.sent", {"sentiment": "dissatisfied"}))
        for proposed in (e for e in batch if e["trajectory_id"] == trajectory_id
                         and e["type"] == "edit.proposed"):
            made.append(another("edit.decided", {"edit_id": proposed["payload"]["edit_id"],
                                                 "decision": "rejected"}))
    forged = next((e for e in batch if e["type"] == "completion.served"), None)
    if forged is not None:
        made.append({**forged, "event_id": str(uuid7())})
    return copies + made


def _post(server: IngestServer, events: list[dict[str, Any]], key: str) -> dict[str, Any]:
    sent_at = datetime.now(UTC).isoformat()
    body = b"\n".join(json.dumps({**e, "sent_at": sent_at}).encode() for e in events)
    answer = server.post(body, key=key)
    assert answer.status_code in (200, 207), answer.text
    return answer.json()


@pytest.fixture
def two_orgs(kafka: Settings) -> Iterator[IngestServer]:
    keys = KeyRing([
        ApiKey("acme-ingest", hash_key(ACME_KEY), "acme", frozenset({ALL, "completion.served"}),
               1e6, 1e6),
        ApiKey("evil-ingest", hash_key(EVIL_KEY), "evil", frozenset({ALL}), 1e6, 1e6),
    ])
    with running_server(kafka, replace(ingest_config(), keys=keys)) as server:
        yield server


def test_another_org_replaying_ids_changes_nothing_of_an_orgs_rewards_or_views(
        kafka: Settings, two_orgs: IngestServer, tmp_path: Path) -> None:
    events = _acme_events()
    acme_answers: list[dict[str, Any]] = []
    evil_rejected: list[dict[str, Any]] = []
    for start in range(0, len(events), _BATCH):
        batch = events[start:start + _BATCH]
        evil_rejected += _post(two_orgs, _hostile(batch), EVIL_KEY)["rejected"]
        acme_answers.append(_post(two_orgs, batch, ACME_KEY))

    # No acme event was taken for evil's copy: each id acme sent is accepted the first time
    # (the simulated log repeats some events itself: those repeats alone are duplicates).
    accepted = [a for answer in acme_answers for a in answer["accepted"]]
    assert len(accepted) == len({e["event_id"] for e in events})
    # evil's forged completions were refused by type, naming it.
    assert evil_rejected and all(r["kind"] == "type_not_allowed" and "completion.served"
                                 in r["reason"] for r in evil_rejected)

    rows = [(r.partition, r.offset, r.value or b"") for r in read_topic(kafka, "events.raw")]
    spec = load_spec()
    everything = replay_rows(rows, spec)
    acme_alone = replay_rows([row for row in rows if json.loads(row[2])["org_id"] == "acme"],
                             spec)
    assert acme_alone.records and len(everything.records) > len(acme_alone.records)
    live = run_in_process(kafka, tmp_path, len(everything.records), timeout_s=240)
    acme_live = {key: record for key, record in live.items() if record.org_id == "acme"}
    assert {key: r.model_dump_json() for key, r in acme_live.items()} == {
        reward_record_key(r.org_id, r.trajectory_id, r.spec_version): r.model_dump_json()
        for r in acme_alone.records}
    evil_live = [key for key, record in live.items() if record.org_id == "evil"]
    assert evil_live and all(key.startswith(b"evil|") for key in evil_live)

    # The monitors' acme windows are those of acme's records alone, and acme's staff see only
    # acme's series.
    expected = {_summary(w) for _, w in windows_from_rewards(acme_alone.records, MonitorConfig(),
                                                              flush=False)
                if w.org_id == "acme"}
    assert expected
    with metrics_worker(kafka, tmp_path):
        windows = wait_for(lambda: (found := _acme_windows(kafka)) == expected and found, 120,
                           "acme's reward windows")
    assert windows == expected
    console = ConsoleState(kafka)
    console.start()
    try:
        series = wait_for(lambda: console.series_view("rewards", "reward", Grant(
            frozenset({"acme"}))), 30, "acme's series in the console")
    finally:
        console.stop()
    assert {s["org"] for s in series} == {"acme"}


def _summary(window: MetricWindow) -> tuple[Any, ...]:
    return (window.checkpoint_id, window.arm, window.window_start.isoformat(),
            window.trajectories, round(window.stats["reward"].sum, 6))


def _acme_windows(settings: Settings) -> set[tuple[Any, ...]]:
    windows = (MetricWindow.model_validate_json(r.value) for r in read_topic(settings, "metrics"))
    return {_summary(w) for w in windows if w.scope == "rewards" and w.org_id == "acme"}


def test_ids_of_one_org_are_not_duplicates_for_another(two_orgs: IngestServer) -> None:
    tool_call = next(e for e in _acme_events() if e["type"] == "tool.called")
    event = {**tool_call, "event_id": str(uuid7())}
    assert _post(two_orgs, [event], EVIL_KEY)["accepted"]
    assert _post(two_orgs, [event], ACME_KEY)["accepted"]
    assert _post(two_orgs, [event], ACME_KEY)["duplicates"]
