"""``rewardstream quarantine list|export`` on the real quarantine topic: each record once, with
its consumer, place, reason and bytes, so a fixed event can be sent again."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infra.quarantine import QuarantineSink
from infra.settings import Settings
from rewardstream.cli import app

pytestmark = pytest.mark.kafka

NOT_FINITE = b'{"type": "completion.served", "payload": {"latency_ms": 1e999}}'
NOT_UTF8 = b"\xff\xfe\x00 not a reward record"


def test_quarantine_list_and_export_give_each_record_once_with_its_bytes(
        kafka: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    join = QuarantineSink(kafka, "reward-join")
    trainer = QuarantineSink(kafka, "trainer")
    for _ in range(2):  # a consumer replaying its partition quarantines the same record again
        join.put("events.raw", 0, 7, NOT_FINITE, "payload.latency_ms: not a finite number")
    trainer.put("rewards", 1, 3, NOT_UTF8, "not a RewardRecord: invalid JSON")
    join.close()
    trainer.close()
    monkeypatch.setenv("REWARDSTREAM_TOPIC_PREFIX", kafka.topic_prefix)

    listed = CliRunner().invoke(app, ["quarantine", "list"])
    assert listed.exit_code == 0, listed.output
    assert listed.output.splitlines()[-1] == "2 quarantined record(s)"
    join_line = next(line for line in listed.output.splitlines() if "reward-join" in line)
    assert "events.raw/0/7" in join_line and f"{len(NOT_FINITE)} B" in join_line
    assert join_line.endswith("payload.latency_ms: not a finite number")

    only = CliRunner().invoke(app, ["quarantine", "list", "--consumer", "trainer", "--json"])
    [row] = [json.loads(line) for line in only.output.splitlines()]
    assert (row["consumer"], row["source_topic"], row["source_partition"],
            row["source_offset"]) == ("trainer", "rewards", 1, 3)
    assert base64.b64decode(row["value_base64"]) == NOT_UTF8 and "value" not in row

    out = tmp_path / "bad.jsonl"
    exported = CliRunner().invoke(app, ["quarantine", "export", "--out", str(out)])
    assert exported.exit_code == 0 and "wrote 2 record(s)" in exported.output
    rows = {r["consumer"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert rows["reward-join"]["value"].encode() == NOT_FINITE
    assert rows["reward-join"]["reason"] == "payload.latency_ms: not a finite number"
