"""``rewardstream ab report`` reading reward records from the real rewards topic."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from infra.kafka_io import make_producer
from infra.settings import Settings
from rewardstream.cli import app
from schemas.topics import topic_name
from streams.monitors.simulate import PROFILES, Segment, simulate

pytestmark = pytest.mark.kafka


def test_ab_report_from_the_rewards_topic(kafka: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    segment = Segment({"control": ("c0", PROFILES["healthy"]),
                       "candidate": ("c1", PROFILES["slow"])}, 2000, split={"control": 3.0})
    producer = make_producer(kafka, "test")
    topic = topic_name(kafka.topic_prefix, "rewards")
    records = list(simulate([segment], seed=4))
    for record in records + records[:300]:  # 300 repeated, as a restarted reward join may
        producer.send(topic, key=record.trajectory_id.encode(),
                      value=record.model_dump_json().encode())
    producer.flush()
    producer.close()
    monkeypatch.setenv("REWARDSTREAM_TOPIC_PREFIX", kafka.topic_prefix)
    result = CliRunner().invoke(app, ["ab", "report", "--baseline", "control", "--candidate",
                                      "candidate", "--split", "75/25"])
    assert result.exit_code == 0, result.output
    latency = next(line for line in result.output.splitlines() if line.startswith("Latency"))
    assert latency.rstrip().endswith("worse")  # the slow profile: +44% median latency
    assert "sample ratio ok" in result.output
    wrong = CliRunner().invoke(app, ["ab", "report", "--baseline", "control", "--candidate",
                                     "candidate", "--margin", "0.75"])  # 50/50 against 75/25
    assert "SAMPLE RATIO MISMATCH" in wrong.output
    assert "NOT non-inferior (no sample-ratio mismatch;" in wrong.output
    assert ": sample ratio mismatch (p=" in wrong.output
    counted = json.loads(CliRunner().invoke(app, [
        "ab", "report", "--baseline", "control", "--candidate", "candidate", "--split", "75/25",
        "--json"]).output)
    assert counted["n_baseline"] + counted["n_candidate"] == len(records)  # repeats once
